"""Places in the app have names (explorer/registry.py): a page's tabs and its own view fields, so links and
discoveries say "attention, tab what-if" and survive a moved tab or a renamed widget key (issue 21)."""
import re
from pathlib import Path

import pytest

from explorer import discoveries
from explorer.registry import BY_SLUG, ENCODER_DECODER, STEPS
from model.checkpoint import load_bundled

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("page", [p for p in [*STEPS, ENCODER_DECODER] if p.tabs], ids=lambda p: p.slug)
def test_each_page_draws_the_tabs_the_registry_names_in_its_order(page):
    script = (ROOT / page.file).read_text()
    assert f'sections("{page.slug}")' in script, page.file
    module = {"encoder-decoder": "encoder_decoder"}.get(page.slug, page.slug)
    steps = __import__(f"explorer.steps.{module}", fromlist=["SECTIONS"])
    assert steps.SECTIONS == page.labels and len(set(page.labels)) == len(page.labels)
    assert len({name for name, _ in page.tabs}) == len(page.tabs)


@pytest.mark.parametrize("page", [p for p in BY_SLUG.values() if p.fields], ids=lambda p: p.slug)
def test_every_named_field_is_a_key_its_page_reads(page):
    script = (ROOT / page.file).read_text()
    for name, key in page.fields:
        assert f'"{key}"' in script, f"{page.file} never reads {key} (field {name!r})"


def test_every_discovery_says_where_it_goes_by_name():
    cards = discoveries.discoveries(load_bundled("tinytales"), "tinytales") + [discoveries.diverging_card()]
    assert {c.key for c in cards} >= {"pronoun", "knockout", "agreement", "names", "positions", "scaling", "diverging"}
    for card in cards:
        target = card.target
        page = BY_SLUG[target.slug]
        if target.tab:
            assert target.section == page.tab(target.tab) in page.labels
        assert set(target.state) == {page.field(name) for name, _ in target.fields}
    with pytest.raises(KeyError, match="no tab 'nowhere'"):
        discoveries.Target("attention", tab="nowhere").section
    with pytest.raises(KeyError, match="no field"):
        discoveries.Target("attention", fields=(("seat", 1),)).state
