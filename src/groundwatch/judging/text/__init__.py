"""The text toolkit of the judges and of scoring: words and their units (:mod:`.lexical`),
answers cut into claims (:mod:`.claims`), numbers read as quantities (:mod:`.numerals`), and
structured tool outputs read as statements (:mod:`.structured`)."""
