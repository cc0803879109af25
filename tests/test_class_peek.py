"""The teacher's second screen (a phone, or a laptop beside the projector) in AppTest: its link is on the teacher's
class page only; it shows the step's note and the open question's answer with its number before the reveal, while the
projector hides it; its Previous, Next and Reveal lead the class (the projector and every student follow); a forged
link is refused and a gone class is told in plain words."""
from urllib.parse import parse_qs, urlsplit

import torch

from bench.apptest import fragment_ids, run_fragment
from conftest import page_text
from explorer import questions
from explorer.app import classroom, peek
from explorer.classroom.store import peek_key
from explorer.numbers import percent
from explorer.view import escape
from model.checkpoint import load_bundled
from test_class import LESSON, QUESTION, class_page, on_page, student, teacher


def second_screen_link(t) -> str:
    [link] = [c.value for c in t.code if "peek=" in c.value]
    return link


def opened(link: str):
    """A new session (the teacher's phone) on the second screen's link."""
    return class_page(**{name: values[0] for name, values in parse_qs(urlsplit(link).query).items()})


def controls(at) -> set[str]:
    return {b.key for b in at.button if b.key.startswith("peek_")}


def test_the_teachers_class_page_offers_the_second_screens_link_which_never_carries_the_teacher_key():
    t = teacher()
    code, key = t.session_state[classroom.CODE], t.session_state[classroom.KEY]
    [hidden] = [p for p in t.get("popover") if p.proto.popover.label == "Your second screen"]
    assert second_screen_link(t) in [c.value for c in hidden.code]          # behind a button the teacher opens
    query = parse_qs(urlsplit(second_screen_link(t)).query)
    assert query == {"peek": [code], "key": [peek_key(key)], "server": [classroom.store().server_id()]}
    assert urlsplit(second_screen_link(t)).path == "/class" and key not in second_screen_link(t)
    assert key not in page_text(t) and key not in [c.value for c in t.code]
    assert len(t.get("image")) == 2                                          # the join link's QR code, and this one's
    s = student(code)
    s.switch_page("pages/class.py").run()
    assert not [c for c in s.code if "peek=" in c.value] and not s.get("popover")   # never on a student's screen


def test_the_second_screen_shows_the_note_and_the_models_answer_and_leads_the_class_while_the_projector_waits():
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code, "Ada")
    p = opened(second_screen_link(t))
    assert not p.exception and p.session_state.get(classroom.ROLE) is None      # no student: never counted
    assert classroom.store().present(code) == 1 and classroom.store().names(code) == ["Ada"]
    assert f"step 1 of {len(LESSON.steps)}" in page_text(p) and "1 student present" in page_text(p)
    assert f"**Note:** {escape(LESSON.steps[0].note)}" in page_text(p)
    assert controls(p) == {"peek_previous", "peek_next"} and p.button(key="peek_previous").disabled
    assert p.query_params["peek"] == code and p.query_params["key"]            # a reload opens it again
    t.button(key="class_show_step").click().run()                              # the projector shows the first step

    p.button(key="peek_next").click().run()
    assert classroom.store().state(code).step == 1
    assert f"step 2 of {len(LESSON.steps)}" in page_text(p) and escape(LESSON.steps[1].note) in page_text(p)
    s.run()
    assert on_page(s) == LESSON.steps[1].page and s.session_state[classroom.STEP] == 1          # students follow
    [poll] = fragment_ids(t)                                     # the projector's poll, as a server runs it
    assert run_fragment(t, poll) == 1                            # one full run opens the class's step
    assert on_page(t) == LESSON.steps[1].page and t.session_state[classroom.STEP] == 1
    assert t.session_state["head"] == LESSON.steps[1].view.get("head", t.session_state["head"])
    assert run_fragment(t, poll) == 0                            # followed: idle again
    p.button(key="peek_previous").click().run()
    t.run()                                                      # a full run follows too (AppTest never ticks)
    assert on_page(t) == LESSON.steps[0].page and t.session_state[classroom.STEP] == 0
    t.button(key="class_next").click().run()                     # the teacher's own Next goes on from there
    assert classroom.store().state(code).step == 1 and on_page(t) == LESSON.steps[1].page

    while classroom.store().state(code).step < QUESTION:
        p.button(key="peek_next").click().run()
    step = LESSON.steps[QUESTION]
    bundle = load_bundled(step.view["model"])                    # the answer, from the model's own forward pass
    ids = bundle.tokenizer.encode(step.view["text"])
    probs = torch.softmax(bundle.model.run(ids)["logits"][0, step.view["token"]].double(), -1)
    answer = bundle.tokenizer.vocab[int(probs.argmax())]
    reading = questions.reading(step.view["model"], bundle, step.view["text"], 64)
    cfg = bundle.model.cfg
    said = questions.ask(step.question, reading,
                         questions.place(step.view, cfg.n_layers, cfg.n_heads, len(reading.ids))).said
    words = f"**The model's answer:** “{answer}” ({escape(percent(float(probs.max())))})."
    assert said and answer in said
    text = page_text(p)
    assert escape(step.question.prompt) in text and words in text and said in text and "Not revealed" in text
    assert controls(p) == {"peek_previous", "peek_next", "peek_reveal"} and not p.button(key="peek_reveal").disabled
    for screen in (t, s):                                        # the projector and the phones do not show it yet
        screen.run()
        assert not screen.exception and "The model's answer" not in page_text(screen) and said not in page_text(screen)
    s.radio(key=f"class_answer_{QUESTION}").set_value(answer).run()
    s.button(key="class_send").click().run()
    p.run()
    assert f"**1 of 1** answered: " in page_text(p) and f"“{escape(answer)}” 1" in page_text(p)

    p.button(key="peek_reveal").click().run()
    assert classroom.store().state(code).is_revealed and p.button(key="peek_reveal").disabled
    assert "Revealed: every screen shows it" in page_text(p)
    for screen in (t, s):
        screen.run()
        assert words.removesuffix(".") in page_text(screen) and said in page_text(screen)
    assert "right!" in page_text(s)


def test_a_forged_or_cut_link_is_refused_with_a_message_and_no_control():
    t = teacher()
    code, key = t.session_state[classroom.CODE], t.session_state[classroom.KEY]
    other = teacher()
    real = parse_qs(urlsplit(second_screen_link(t)).query)["key"][0]
    for forged in ("", "forged", real[:-1], peek_key(other.session_state[classroom.KEY]), peek_key(real)):
        p = class_page(peek=code, key=forged, server=classroom.store().server_id())
        assert not p.exception and not controls(p), forged
        assert f"This link does not lead class {code}." in page_text(p)
        assert escape(LESSON.steps[0].note) not in page_text(p) and "step 1 of" not in page_text(p)
    p = class_page(peek=code)                                    # a link cut before its key
    assert not controls(p) and f"This link does not lead class {code}." in page_text(p)
    assert classroom.store().state(code).step == 0 and classroom.store().present(code) == 0
    assert peek_key(key) == real


def test_a_second_screen_is_told_when_its_class_ended_or_the_server_restarted():
    t = teacher()
    code = t.session_state[classroom.CODE]
    link = second_screen_link(t)
    p = opened(link)
    [poll] = fragment_ids(p)                                     # the second screen's poll, as a server runs it
    assert run_fragment(p, poll) == 0                            # the class is there: nothing more runs
    t.button(key="class_end").click().run()
    assert run_fragment(p, poll) == 1                            # gone: one full run says why
    assert not p.exception and not controls(p)
    assert f"**Class {code} has ended.**" in page_text(p)
    t = teacher()
    code = t.session_state[classroom.CODE]
    link = second_screen_link(t)
    classroom.store.clear()                                      # the server restarts: a new, empty store
    p = opened(link)
    assert not controls(p) and f"**Class {code} ended because the server restarted.**" in page_text(p)
    assert peek.PEEK in p.session_state
