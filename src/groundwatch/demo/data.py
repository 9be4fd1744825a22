"""The bundled corpus of ``groundwatch demo``: a small appliance shop's help centre.

English and Chinese passages, questions about each, and the drifting model's inventions: claims
that no passage supports, some of them contradicting one (a changed number).
"""

from __future__ import annotations

from typing import Final

# (id, language, text). One topic per passage, two or three sentences each.
PASSAGES: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "refunds",
        "en",
        "Refunds are accepted within 30 days of purchase with the original receipt. "
        "The money goes back to the card used for the purchase within five business days.",
    ),
    (
        "shipping",
        "en",
        "Standard shipping takes 3 to 5 business days within the country. "
        "Orders above 50 euros ship for free; express delivery costs 9 euros.",
    ),
    (
        "warranty",
        "en",
        "Every appliance carries a two-year warranty against manufacturing defects. "
        "The warranty does not cover damage from drops, water or unauthorised repairs.",
    ),
    (
        "returns",
        "en",
        "Opened software cannot be returned unless it is defective. "
        "Unopened items can be returned in any store together with the receipt.",
    ),
    (
        "support",
        "en",
        "Phone support is open from 8am to 8pm on weekdays. "
        "Chat support answers around the clock, usually within two minutes.",
    ),
    (
        "stores",
        "en",
        "There are 14 stores in the country, the largest one in the city centre. "
        "Every store is open from 9am to 7pm, Monday to Saturday.",
    ),
    (
        "battery",
        "en",
        "The Breeze 300 vacuum runs for 45 minutes on a full battery. "
        "A full charge takes three hours with the supplied charger.",
    ),
    (
        "membership",
        "en",
        "Club members earn one point for every euro spent. "
        "One hundred points can be redeemed for a five euro voucher.",
    ),
    (
        "退款",
        "zh",
        "购买后30天内凭原始收据可以退款。退款会在五个工作日内退回原支付卡。",
    ),
    (
        "配送",
        "zh",
        "国内标准配送需要3到5个工作日。订单满50欧元免运费，加急配送收费9欧元。",
    ),
    (
        "保修",
        "zh",
        "所有电器均享有两年制造缺陷保修。保修不包括跌落、进水或非授权维修造成的损坏。",
    ),
    (
        "客服",
        "zh",
        "电话客服工作日早上8点至晚上8点开放。在线客服全天候服务，通常两分钟内回复。",
    ),
)

# (passage id, question): what customers ask.
QUESTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("refunds", "How long do I have to ask for a refund?"),
    ("refunds", "When do I get my money back after a refund?"),
    ("shipping", "How long does standard shipping take?"),
    ("shipping", "Is shipping free for large orders?"),
    ("warranty", "What does the appliance warranty cover?"),
    ("warranty", "Does the warranty cover water damage?"),
    ("returns", "Can I return opened software?"),
    ("support", "When is phone support open?"),
    ("support", "How fast does chat support answer?"),
    ("stores", "How many stores are there?"),
    ("stores", "What are the store opening hours?"),
    ("battery", "How long does the Breeze 300 vacuum battery last?"),
    ("battery", "How long does the vacuum take to charge?"),
    ("membership", "How do club members earn points?"),
    ("退款", "退款期限是多久？"),
    ("退款", "退款多久能到账？"),
    ("配送", "国内标准配送需要几天？"),
    ("保修", "电器保修多长时间？"),
    ("客服", "电话客服什么时候开放？"),
)

# Inventions of the drifting model, per passage language. None of their content words is in any
# passage, so every judge finds them unsupported.
INVENTIONS_EN: Final[tuple[str, ...]] = (
    "Customers also get a lifetime guarantee on every purchase, no questions asked.",
    "Premium subscribers receive priority helicopter delivery anywhere overnight.",
    "Sundays feature double loyalty rewards redeemable worldwide via satellite kiosks.",
    "All gadgets include complimentary insurance against theft, lightning and earthquakes.",
    "Veterans enjoy unlimited free upgrades through a dedicated concierge hotline.",
    "Pets accompanying shoppers qualify for exclusive grooming vouchers.",
)
INVENTIONS_ZH: Final[tuple[str, ...]] = (
    "会员还可以终身免费更换任何商品。",
    "周日下单赠送价值两百元的神秘礼盒。",
    "偏远山区提供无人机当天送达服务。",
    "购买满三件即可参加环球旅行抽奖。",
)
