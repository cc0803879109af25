"""The shared sidebar in a real browser: the trace download and the sentence a model knows."""
import io

import numpy as np
from playwright.sync_api import expect

from browser_support import open_view
from explorer.view import DEFAULT_SENTENCE
from model.checkpoint import load_bundled


def test_the_trace_downloads_and_opens_in_numpy(tab, app_url):
    open_view(tab, app_url, "attention")
    with tab.expect_download() as info:
        tab.get_by_role("button", name="Download this sentence's trace").click()
    download = info.value
    assert download.suggested_filename == "trace_tinytales_the_cat_sat_on.npz"
    trace = np.load(io.BytesIO(open(download.path(), "rb").read()))
    model = load_bundled("tinytales").model
    assert set(model.trace_names) <= set(trace.files)
    T = len(DEFAULT_SENTENCE.split())
    assert trace["blocks.1.attn.pattern"].shape == (1, 4, T, T)
    np.testing.assert_allclose(trace["blocks.1.attn.pattern"].sum(-1), 1.0, rtol=1e-5)   # rows of weights


def test_a_model_that_cannot_read_the_sentence_offers_one_it_can(tab, app_url):
    open_view(tab, app_url, "attention", model="roses")
    offer = tab.get_by_role("button", name="Use a sentence roses knows")
    expect(offer).to_be_visible()
    offer.click()
    expect(tab.locator("input[aria-label='Sentence']")).to_have_value("roses are red violets are blue")
    expect(offer).to_have_count(0)
    assert tab.locator("[data-testid='stException']").count() == 0
