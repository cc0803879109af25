"""The app's own CSS, on top of Streamlit's theme (.streamlit/config.toml): whole labels, presenter mode, a focus
ring every control shows, the navigation's section names, and high contrast for a washed-out projector.

Constants and registry names only: no user text ever goes into this HTML.
"""
from explorer.registry import GROUPS, NAVIGATION

# Every tab label and link label stays whole: a long tab row wraps instead of scrolling, link labels wrap.
# Inline code in a caption takes the caption's colour: Streamlit's green code, faded with the caption, is 2.98:1.
# A formula gets room above and below: its box scrolls sideways, so a tall fraction's numerator was cut off.
# No blue is both light enough for text on the dark theme's near-black (4.5:1) and dark enough under white text
# (buttons, chips): the dark theme's blue is the darker (white on it 4.65:1), so the open tab's label is in the text
# colour (bold, over the blue line) instead of blue, and a multiselect's chosen items are outlined in the text colour.
# A discovery's guess stays readable once revealed (its choices are disabled: Streamlit greys them to 2.61:1).
# The class's scroll to the top and its watch for a dropped page take no room (explorer/app/classroom.py), nor does
# the lab's trainer (pages/training.py).
# `--explorer-styles` tells a test the CSS has arrived (a page's st.html lands a moment after its run ends: bench/live.py).
BASE_CSS = """<style>
:root { --explorer-styles: applied; }
[data-testid="stCaptionContainer"] code { color: inherit; }
.katex-display { padding: 0.5em 0.1em; }
[data-testid="stMultiSelect"] [data-tag] { background-color: transparent !important; color: inherit !important;
  border: 1px solid currentColor; }
[data-testid="stMultiSelect"] [data-tag] * { color: inherit !important; }
[data-testid="stTabs"] [role="tab"][aria-selected="true"], [data-testid="stTabs"] [role="tab"][aria-selected="true"] * {
  color: inherit !important; font-weight: 600; }
[data-testid="stRadio"]:has(input:disabled) label, [data-testid="stRadio"]:has(input:disabled) label * {
  color: inherit !important; }
[data-testid="stSliderThumbValue"], [data-testid="stSliderThumbValue"] * { color: inherit !important; }
[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; overflow: visible; row-gap: 0.25rem; }
[data-testid="stTabsScrollLeft"], [data-testid="stTabsScrollRight"] { display: none !important; }
[data-testid="stPageLink-NavLink"] *, [data-testid="stSidebarNavLink"] * { white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; }
.st-key-class_to_the_top, .st-key-class_blank_watch, .st-key-lab_trainer { display: none; }
</style>"""

# A small first screen, a projector's or a phone's (explorer/view.py, `View.compact`): the page's chart comes first.
# A tab's own subheading is left out (the tab's label and the chart's title already say it). Presenter mode applies
# these rules at any width, every page applies them on a narrow screen (PHONE_CSS).
SMALL_SCREEN_RULES = """
[role="tabpanel"] [data-testid="stElementContainer"]:has(> [data-testid="stHeading"] h3) { display: none; }"""

# Larger type for a projector, the full width for figures, and little empty space above the title, between elements
# and in the class box, so each tab's main chart fits on the first screen of a 1366 x 768 projector, a class's too
# (tests/test_browser_presenter.py and test_browser_lessons.py measure it; the chart component draws a chart no
# taller than the room left below it). The tab row stays one line; tables and metrics are larger for the back row
# (a table is drawn on a canvas: zoom is the one way to enlarge its text). The sidebar starts closed
# (streamlit_app.py); opened, it shows the sentence and the presenter switch above the list of pages. A column of the
# pickers beside the title is never narrower than its picker (explorer/app/layout.py, `picker_label`).
# Words in a chart beside the text are at least the text's size (the class's live tally: explorer/app/classroom.py).
BODY_TEXT_PX = 16                 # Streamlit's body text (its theme's base size)
PRESENTER_TEXT_PX = 22            # presenter mode's body text: every size of type there is relative to it
PRESENTER_CSS = """<style>""" + SMALL_SCREEN_RULES + f"""
html, body, [data-testid="stAppViewContainer"] {{ font-size: {PRESENTER_TEXT_PX}px; }}""" + """
[data-testid="stHeader"] { height: 48px; min-height: 0; }
[data-testid="stMainBlockContainer"] { max-width: none; padding: 50px 1.5rem 2rem 1.5rem; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.25rem; }
h1 { font-size: 1.9rem !important; padding: 0 !important; } h2 { font-size: 1.6rem !important; }
h3 { font-size: 1.4rem !important; }
[data-testid="stTabs"] [role="tab"] p { font-size: 1.05rem !important; }
[data-testid="stElementContainer"]:has(> [data-testid="stFullScreenFrame"] > [data-testid="stDataFrame"]) {
  zoom: 1.3; width: calc(100% / 1.3) !important; }
[data-testid="stPopoverButton"] p { font-size: 1rem !important; }
[data-testid="stMetricValue"], [data-testid="stMetricValue"] * { font-size: 2.2rem !important; }
[data-testid="stSidebar"], [data-testid="stSidebar"] * { font-size: 16px !important; }
[data-testid="stSidebarContent"] { display: flex; flex-direction: column; }
[data-testid="stSidebarHeader"] { order: -2; } [data-testid="stSidebarUserContent"] { order: -1; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.75rem; }
.st-key-title_row [data-testid="stHorizontalBlock"] { flex-wrap: nowrap; }
.st-key-title_row [data-testid="stColumn"] { min-width: min-content; }
.st-key-title_row > [data-testid="stLayoutWrapper"] { min-width: min-content; }
.st-key-class_box { padding: 0.5rem 0.75rem; }
.st-key-class_box [data-testid="stMarkdownContainer"] p { font-size: 1.05rem; }
.st-key-class_box [data-testid^="stBaseButton"], .st-key-class_box [data-testid="stPopoverButton"] {
  min-height: 0; padding-top: 0.2rem; padding-bottom: 0.2rem; }
</style>"""

# A phone (a window 640 px wide or less, where Streamlit stacks columns and the chart component fits a chart to a
# phone): the small first screen's rules, little empty space above a smaller title, between elements (as a
# projector's) and in the class box, a page's
# pickers side by side however narrow (explorer/app/layout.py, `picker_row`), the column of a page's main chart first
# (`main_chart`), and every button, tab, radio choice, toggle and panel header at least 44 px high, a fingertip's size
# (the WCAG walk on a phone, tests/test_browser_a11y.py, measures them): a help mark keeps its size with a 44 px
# target around it, a chart's hover toolbar keeps its own. The server folds the words of a phone's pages (its
# User-Agent says it is a phone: explorer/app/state.py, `on_a_phone`).
NARROW = 640
PHONE_CSS = f"""<style>
@media (max-width: {NARROW}px) {{""" + SMALL_SCREEN_RULES + """
[data-testid="stHeader"] { height: 48px; min-height: 0; }
[data-testid="stMainBlockContainer"] { padding-top: 52px; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.75rem; }
h1 { font-size: 1.75rem !important; padding: 0.25rem 0 !important; }
.st-key-class_box { padding: 0.5rem; gap: 0.25rem; } .st-key-class_box [data-testid="stVerticalBlock"] { gap: 0.25rem; }
.st-key-class_box p { font-size: 0.875rem; }
.st-key-pickers [data-testid="stColumn"] { min-width: 0; }
.stApp [data-testid="stMain"] button, .stApp [data-testid="stHeader"] button, .stApp [role="tab"], .stApp summary,
.stApp [data-testid="stPageLink-NavLink"] { min-height: 44px; }
.stApp [data-testid="stHeader"] button { min-width: 44px; }
.stApp [data-testid="stRadio"] label, .stApp [data-testid="stCheckbox"] label { min-height: 44px; align-items: center; }
.stApp [data-testid="stTooltipIcon"] button { min-height: 0; padding: 14px; margin: -14px; }
.stApp .js-plotly-plot button { min-height: 0; }
[data-testid="stColumn"]:has(.st-key-main_chart) { order: -1; }
}
</style>"""

# The keyboard's place, on every control: a 3 px ring 2 px outside the control. One mid-tone blue (relative
# luminance 0.21) has at least 3:1 against every background the app has, light or dark: white 4.1:1, the light
# sidebar's #f0f2f6 3.7:1, the dark theme's #0e1117 4.6:1 and its sidebar's #262730 3.6:1
# (tests/test_browser_keyboard.py measures it). Streamlit's own rings are 1.1-2.3:1, or a background change only.
FOCUS_COLOUR = "#3b7dd8"
FOCUS_CSS = f"""<style>
.stApp :focus-visible, .stApp [data-baseweb="select"]:has(input:focus-visible) > div,
.stApp [data-baseweb="input"]:has(input:focus-visible), .stApp [data-baseweb="textarea"]:has(textarea:focus-visible),
.stApp label:has(> input:focus-visible), .stApp label:has(input[type=checkbox]:focus-visible),
.stApp label:has(input[type=radio]:focus-visible) {{
  outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: 2px !important; }}
.stApp [data-baseweb="select"] input:focus-visible, .stApp [data-baseweb="input"] input:focus-visible,
.stApp textarea:focus-visible, .stApp label input:focus-visible {{ outline: none !important; }}
</style>"""


def _nav_sections_css() -> str:
    """The sidebar navigation is one flat list (its own sections put headers between a list and its items, which
    breaks the list for a screen reader); each group's name is drawn above its first item, inside the item, so a
    screen reader reads it too ("Walk-through, link The big picture")."""
    place = {page.slug: n for n, page in enumerate(NAVIGATION, start=1)}
    rules = [f'[data-testid="stSidebarNavItems"] > li:nth-child({place[slug]})::before {{ content: "{name}"; }}'
             for slug, name in GROUPS.items()]
    return ("<style>\n" + "\n".join(rules) + """
[data-testid="stSidebarNavItems"] > li::before { display: block; font-size: 0.875rem; font-weight: 600;
  padding: 0.75rem 0.5rem 0.25rem 0.5rem; }
</style>""")


NAV_CSS = _nav_sections_css()

# High contrast for a washed-out projector, in the light theme and the dark: no grey text (captions, help, the
# navigation's other pages are the theme's full text colour), thicker type and lines, borders in the text's own
# colour (where there is a border: a block without one keeps none), underlined links.
HIGH_CONTRAST_CSS = """<style>
.stApp, .stApp p, .stApp li, .stApp label, .stApp [data-testid="stMarkdownContainer"] { font-weight: 500; }
.stApp h1, .stApp h2, .stApp h3, .stApp strong, .stApp b { font-weight: 800 !important; }
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] *,
.stApp [data-testid="stWidgetLabel"] *, .stApp [data-testid="stSidebarNavLink"] *,
.stApp [data-testid="stPageLink-NavLink"] *, .stApp [data-testid="stExpander"] summary *,
.stApp [data-testid="stTab"] * { color: inherit !important; opacity: 1 !important; }
.stApp [data-testid="stSidebarNavLink"], .stApp [data-testid="stPageLink-NavLink"] { color: inherit !important; }
.stApp [data-testid="stSidebarNavLink"] *, .stApp [data-testid="stPageLink-NavLink"] p,
.stApp [data-testid="stMarkdownContainer"] a { text-decoration: underline; text-underline-offset: 0.2em; }
.stApp [data-testid="stVerticalBlock"], .stApp [data-testid="stExpander"] details,
.stApp [data-testid="stExpanderDetails"], .stApp [data-baseweb="select"] > div, .stApp [data-baseweb="input"],
.stApp hr, .stApp [data-testid="stAlertContainer"], .stApp [data-testid^="stBaseButton"],
.stApp [data-testid="stPopoverButton"] { border-color: currentColor !important; border-width: 2px !important; }
</style>"""


def page_css(presenter: bool, high_contrast: bool) -> str:
    """All the app's CSS for one page run."""
    return (BASE_CSS + FOCUS_CSS + NAV_CSS + PHONE_CSS + (PRESENTER_CSS if presenter else "")
            + (HIGH_CONTRAST_CSS if high_contrast else ""))
