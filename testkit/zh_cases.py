"""A hand-written Chinese set: faithful paraphrases, syntheses and format changes against
hallucinations (entity swaps, negation, cause/effect reversals, changed numbers, added facts).

Each case is ``(passage key, answer, faithful?)``. The passages are short news-style texts;
the answers were written to test the judge's Chinese path, not taken from any dataset.
"""

from __future__ import annotations

PASSAGES = {
    "phone": (
        "华为公司于2023年9月发布了新款手机Mate 60。该手机搭载麒麟9000S芯片，首批销量超过100万台。"
        "由于市场需求旺盛，公司决定追加生产订单。"
    ),
    "rain": (
        "受暴雨影响，北京市昨日关闭了12个地铁站。市交通委表示，预计周五恢复正常运营。"
        "这次降雨是北京今年以来最强的一次。"
    ),
    "study": (
        "张教授团队在清华大学开展了为期三年的研究。研究发现，每天步行30分钟可以使心脏病风险降低20%。"
        "该成果发表在《柳叶刀》杂志上。"
    ),
    "loan": (
        "该银行的个人贷款年利率为4.5%，贷款期限最长为5年，不收取手续费。"
        "申请人需年满18周岁，并提供收入证明。"
    ),
    "profit": (
        "由于原材料价格上涨，该公司第三季度净利润下降了15%。"
        "公司董事长李明表示，将通过优化供应链来控制成本。"
    ),
    "park": (
        "上海迪士尼乐园于2016年6月16日正式开园。"
        "乐园占地面积约390公顷，是中国大陆第一座迪士尼主题乐园。"
    ),
    "vaccine": (
        "新冠疫苗接种后，部分人可能出现发热、乏力等轻微反应，通常在两到三天内自行缓解。"
        "专家建议接种后留观30分钟。"
    ),
    "games": (
        "杭州亚运会于2023年9月23日开幕，共有来自45个国家和地区的约12000名运动员参赛。"
        "中国代表团获得201枚金牌，位列金牌榜第一。"
    ),
}

FAITHFUL = True
HALLUCINATED = False

CASES: list[tuple[str, str, bool]] = [
    # --- faithful: paraphrase, synonyms, reordering, numeral formats, synthesis ---
    ("phone", "华为在2023年9月推出了Mate 60手机。", FAITHFUL),
    ("phone", "Mate 60采用的是麒麟9000S芯片。", FAITHFUL),
    ("phone", "Mate 60的首批销量超过一百万台。", FAITHFUL),
    ("phone", "因为市场需求很旺盛，华为决定增加生产订单。", FAITHFUL),
    ("phone", "Mate 60手机由华为公司在2023年9月发布。", FAITHFUL),
    ("rain", "因为暴雨，北京昨天关闭了12座地铁站。", FAITHFUL),
    ("rain", "北京市交通委预计地铁站将在周五恢复正常运营。", FAITHFUL),
    ("rain", "这是北京今年以来最强的一次降雨。", FAITHFUL),
    ("rain", "暴雨导致北京十二个地铁站关闭。", FAITHFUL),
    ("study", "张教授的团队在清华大学进行了三年的研究。", FAITHFUL),
    ("study", "研究表明，每天步行三十分钟可使心脏病风险降低百分之二十。", FAITHFUL),
    ("study", "这项研究成果刊登在《柳叶刀》上。", FAITHFUL),
    ("study", "清华大学的张教授团队研究了三年，发现每天步行30分钟能降低心脏病风险。", FAITHFUL),
    ("loan", "该银行个人贷款的年利率是4.5%。", FAITHFUL),
    ("loan", "这种贷款不收手续费，期限最长五年。", FAITHFUL),
    ("loan", "申请人必须年满18岁并提供收入证明。", FAITHFUL),
    ("loan", "该银行的个人贷款期限最长为5年。", FAITHFUL),
    ("profit", "原材料涨价导致该公司第三季度净利润减少了15%。", FAITHFUL),
    ("profit", "李明称公司会通过优化供应链控制成本。", FAITHFUL),
    ("profit", "该公司第三季度的净利润降低了百分之十五。", FAITHFUL),
    ("park", "上海迪士尼乐园在2016年6月16日开园。", FAITHFUL),
    ("park", "上海迪士尼是中国大陆首座迪士尼主题乐园。", FAITHFUL),
    ("park", "上海迪士尼乐园的占地面积大约是390公顷。", FAITHFUL),
    ("park", "上海迪士尼乐园占地约三百九十公顷。", FAITHFUL),
    ("vaccine", "接种新冠疫苗后，有些人会出现发热和乏力等轻微反应。", FAITHFUL),
    ("vaccine", "这些轻微反应一般在两到三天内会自行缓解。", FAITHFUL),
    ("vaccine", "专家建议接种后留观半小时。", FAITHFUL),
    ("games", "杭州亚运会在2023年9月23日开幕。", FAITHFUL),
    ("games", "约1.2万名运动员参加了杭州亚运会。", FAITHFUL),
    ("games", "中国代表团以201枚金牌位居金牌榜第一。", FAITHFUL),
    ("games", "来自45个国家和地区的运动员参加了杭州亚运会。", FAITHFUL),
    ("games", "杭州亚运会上，中国代表团共获得二百零一枚金牌。", FAITHFUL),
    # --- hallucinated: entity swaps, negation, cause/effect reversal, numbers, added facts ---
    ("phone", "小米公司于2023年9月发布了新款手机Mate 60。", HALLUCINATED),
    ("phone", "Mate 60手机搭载骁龙8芯片。", HALLUCINATED),
    ("phone", "由于公司追加生产订单，市场需求变得旺盛。", HALLUCINATED),
    ("phone", "Mate 60的首批销量超过500万台。", HALLUCINATED),
    ("rain", "受大雪影响，北京市昨日关闭了12个地铁站。", HALLUCINATED),
    ("rain", "北京市昨日关闭了20个地铁站。", HALLUCINATED),
    ("rain", "市交通委表示，地铁站周五不会恢复运营。", HALLUCINATED),
    ("rain", "受暴雨影响，上海市昨日关闭了12个地铁站。", HALLUCINATED),
    ("study", "李教授团队在北京大学开展了为期三年的研究。", HALLUCINATED),
    ("study", "研究发现，每天步行30分钟并不能降低心脏病风险。", HALLUCINATED),
    ("study", "该成果发表在《自然》杂志上。", HALLUCINATED),
    ("study", "张教授团队开展了为期五年的研究。", HALLUCINATED),
    ("loan", "该银行的个人贷款需要收取手续费。", HALLUCINATED),
    ("loan", "该银行的个人贷款期限最长为10年。", HALLUCINATED),
    ("loan", "申请人无需提供收入证明。", HALLUCINATED),
    ("loan", "该银行的个人贷款年利率为3.5%。", HALLUCINATED),
    ("profit", "由于该公司净利润下降，原材料价格上涨了。", HALLUCINATED),
    ("profit", "该公司第三季度净利润增长了15%。", HALLUCINATED),
    ("profit", "公司总经理王强表示，将通过裁员来控制成本。", HALLUCINATED),
    ("park", "上海迪士尼乐园于2018年6月16日正式开园。", HALLUCINATED),
    ("park", "上海迪士尼乐园是亚洲第一座迪士尼主题乐园。", HALLUCINATED),
    ("park", "上海迪士尼乐园占地面积约900公顷。", HALLUCINATED),
    ("vaccine", "新冠疫苗接种后，所有人都会出现高烧反应。", HALLUCINATED),
    ("vaccine", "这些轻微反应通常需要两周才能缓解。", HALLUCINATED),
    ("vaccine", "专家建议接种后不需要留观。", HALLUCINATED),
    ("games", "杭州亚运会于2022年9月23日开幕。", HALLUCINATED),
    ("games", "共有来自60个国家和地区的运动员参加杭州亚运会。", HALLUCINATED),
    ("games", "日本代表团获得201枚金牌，位列金牌榜第一。", HALLUCINATED),
    ("games", "中国代表团获得150枚金牌，位列金牌榜第一。", HALLUCINATED),
    ("games", "由于中国代表团获得201枚金牌，杭州亚运会推迟了开幕。", HALLUCINATED),
]
