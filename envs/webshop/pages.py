"""WebShop's pages as data: the session state, what each page shows, and where clicks lead.

Mirrors ``SimServer.receive`` and the HTML templates of princeton-nlp/WebShop: a search page; a
results page (10 per page from the top 50, ``< Prev`` from page 2, ``Next >`` always, as
upstream); an item page (option groups as radio buttons, title, price, rating, the
Description / Features / Reviews [/ Attributes] buttons, ``Buy Now``); sub-pages with ``< Prev``
back to the item; ``Back to Search`` everywhere. Showing results resets the chosen options.
The done page shows only the thank-you line and the score: upstream's page also carries a hidden
block with the goal, which its text mode leaks and ours does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs.webshop.data import Product

SEARCH, RESULTS, ITEM, ITEM_SUB, DONE = "search", "results", "item", "item_sub", "done"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
PER_PAGE = 10
BACK_TO_SEARCH, NEXT_PAGE, PREV_PAGE, BUY_NOW = "Back to Search", "Next >", "< Prev", "Buy Now"


@dataclass
class Session:
    """Where the shopper is and what they have chosen."""

    page: str = SEARCH
    keywords: str = ""
    results: list[str] = field(default_factory=list)
    page_num: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str | None = None
    visited: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Segment:
    """One visible text of a page: plain text, a button, an option label or a product link."""

    text: str
    kind: str = "text"
    clicked: bool = False


@dataclass(frozen=True)
class Clickable:
    """What a clickable text is: a button, a product link (``asin``) or an option (``group``)."""

    kind: str
    target: str = ""


def header(instruction: str) -> list[Segment]:
    """Return the instruction block that starts every page but the search and done pages."""
    return [Segment("Instruction:"), Segment(instruction)]


def search_segments(instruction: str) -> list[Segment]:
    """Lay out the search page."""
    return [Segment("WebShop"), *header(instruction), Segment("Search", "button")]


def results_segments(
    session: Session, instruction: str, products: dict[str, Product]
) -> list[Segment]:
    """Lay out a results page: 10 products (ASIN link, title, price)."""
    segments = [
        *header(instruction),
        Segment(BACK_TO_SEARCH, "button"),
        Segment(f"Page {session.page_num} (Total results: {len(session.results)})"),
    ]
    if session.page_num > 1:
        segments.append(Segment(PREV_PAGE, "button"))
    segments.append(Segment(NEXT_PAGE, "button"))
    start = (session.page_num - 1) * PER_PAGE
    for asin in session.results[max(start, 0) : start + PER_PAGE]:
        product = products[asin]
        segments += [
            Segment(asin, "product", clicked=asin in session.visited),
            Segment(product.title),
            Segment(product.price_tag),
        ]
    return segments


def item_segments(
    session: Session, instruction: str, product: Product, show_attrs: bool
) -> list[Segment]:
    """Lay out an item page: options, title, price, rating, sub-page buttons, Buy Now."""
    segments = [
        *header(instruction),
        Segment(BACK_TO_SEARCH, "button"),
        Segment(PREV_PAGE, "button"),
    ]
    chosen = set(session.options.values())
    for name, values in product.options.items():
        segments.append(Segment(name))
        segments += [Segment(v, "option", clicked=v in chosen) for v in values]
    segments += [
        Segment(product.title),
        Segment(f"Price: {product.price_tag}"),
        Segment("Rating: N.A."),
    ]
    buttons = SUB_PAGES if show_attrs else SUB_PAGES[:3]
    segments += [Segment(b, "button") for b in buttons]
    segments.append(Segment(BUY_NOW, "button"))
    return segments


def sub_page_segments(session: Session, instruction: str, product: Product) -> list[Segment]:
    """Lay out a Description / Features / Reviews / Attributes page."""
    segments = [
        *header(instruction),
        Segment(BACK_TO_SEARCH, "button"),
        Segment(PREV_PAGE, "button"),
    ]
    if session.sub_page == "Description":
        segments.append(Segment(product.description))
    elif session.sub_page == "Features":
        segments += [Segment(b) for b in product.bullet_points]
    elif session.sub_page == "Attributes":
        segments += [Segment(a) for a in product.attributes]
        segments += [Segment(product.category), Segment(product.query)]
        segments.append(Segment(product.product_category))
    # Reviews: upstream never loads reviews, so the page has only its buttons.
    return segments


def done_segments(reward: float) -> list[Segment]:
    """Lay out the page after Buy Now."""
    return [
        Segment("Thank you for shopping with us!"),
        Segment("Your score (min 0.0, max 1.0)"),
        Segment(str(reward)),
    ]


def clickables(session: Session, product: Product | None, show_attrs: bool) -> dict[str, Clickable]:
    """Lowercased clickable texts of the current page (search page: none; search is typed)."""
    page = session.page
    found: dict[str, Clickable] = {}
    if page in (RESULTS, ITEM, ITEM_SUB):
        found[BACK_TO_SEARCH.lower()] = Clickable("button")
    if page == RESULTS:
        if session.page_num > 1:
            found[PREV_PAGE.lower()] = Clickable("button")
        found[NEXT_PAGE.lower()] = Clickable("button")
        start = (session.page_num - 1) * PER_PAGE
        for asin in session.results[max(start, 0) : start + PER_PAGE]:
            found[asin.lower()] = Clickable("product", asin)
    elif page == ITEM_SUB:
        found[PREV_PAGE.lower()] = Clickable("button")
    elif page == ITEM and product is not None:
        found[PREV_PAGE.lower()] = Clickable("button")
        for b in SUB_PAGES if show_attrs else SUB_PAGES[:3]:
            found[b.lower()] = Clickable("button")
        found[BUY_NOW.lower()] = Clickable("button")
        for name, values in product.options.items():
            for value in values:  # options come last upstream, so a clash goes to the option
                found[value] = Clickable("option", name)
    return found


def apply_click(session: Session, text: str, clickable: Clickable) -> bool:
    """Move ``session`` after clicking ``text``; returns True when it was ``Buy Now``."""
    if clickable.kind == "product":
        session.asin = clickable.target
        session.visited.add(clickable.target)
        session.page, session.sub_page = ITEM, None
    elif clickable.kind == "option":
        session.options[clickable.target] = text
        session.page = ITEM
    elif text == BUY_NOW.lower():
        session.page = DONE
        return True
    elif text == BACK_TO_SEARCH.lower():
        reset_session(session)
    elif text == NEXT_PAGE.lower():
        show_results(session, session.page_num + 1)
    elif text == PREV_PAGE.lower() and session.page == RESULTS:
        show_results(session, session.page_num - 1)
    elif text == PREV_PAGE.lower() and session.page == ITEM_SUB:
        session.page, session.sub_page = ITEM, None
    elif text == PREV_PAGE.lower():
        show_results(session, session.page_num)
    else:
        session.page = ITEM_SUB
        session.sub_page = next(p for p in SUB_PAGES if p.lower() == text)
    return False


def reset_session(session: Session) -> None:
    """Return to the search page with nothing searched, chosen or visited (as upstream)."""
    fresh = Session()
    for name in fresh.__dataclass_fields__:
        setattr(session, name, getattr(fresh, name))


def show_results(session: Session, page_num: int) -> None:
    """Show a results page; as upstream, this forgets the current product and its options."""
    session.page, session.page_num = RESULTS, page_num
    session.asin, session.options, session.sub_page = None, {}, None
