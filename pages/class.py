"""Class: walk a lesson alone, lead a class (a join code, a link and a QR code), or join one as a student."""
import io

import segno
import streamlit as st

from explorer import lessons, questions
from explorer.app import classroom, peek
from explorer.app.layout import explanation, page_header
from explorer.app.state import view
from explorer.view import escape


def qr_png(link: str, scale: int) -> bytes:
    """A QR code of `link`, as PNG."""
    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=scale, border=2)
    return buffer.getvalue()


def edit_draft(steps: list) -> lessons.Lesson | None:
    """The lesson being built, as a table: notes to write, an order to change, steps to delete."""
    title = st.text_input("Title", key="lesson_title", max_chars=120, placeholder="Untitled lesson")
    edited = st.data_editor(lessons.steps_table(steps), key="lesson_editor", hide_index=True, width="stretch",
                            disabled=["page", "tab", "sentence", "questions"],
                            column_config={"order": st.column_config.NumberColumn(min_value=1, step=1),
                                           "note": st.column_config.TextColumn(max_chars=1000, width="large"),
                                           "question": st.column_config.SelectboxColumn(
                                               options=["", *questions.KINDS], help="What the class is asked at this "
                                               "step (empty: nothing); “questions” lists the kinds that fit its page"),
                                           "questions": st.column_config.TextColumn("questions that fit")})
    lesson, problems = lessons.from_table(steps, edited, title)
    for problem in problems:
        st.warning(escape(problem), icon=":material/info:")
    if lesson is None:
        st.info("Every step is unticked: nothing to teach yet.", icon=":material/info:")
    return lesson


v = view()
page_header("class", v)
explanation(v, """\
A **lesson** is a list of views (a page with its model, sentence, layer, head, token and tab), each with a note
for the teacher and sometimes a question whose answer the model gives. **Walk it alone** with Next and Previous,
or **lead a class**: students join with a short code on their own screens, follow your Next and Previous within
about a second, answer the questions, and see the model's answer when you reveal it. Nobody needs an account;
names are optional.""", title="How a class works")

if st.session_state.get("_class_problem"):
    st.warning(escape(st.session_state["_class_problem"]), icon=":material/info:")

role = classroom.role()
if peek.active():                                            # the teacher's second screen (its own link)
    st.subheader("Your second screen")
    peek.second_screen(v.name, v.text)                       # polled: it follows the class, and leads it
elif role == "teacher":
    code = st.session_state[classroom.CODE]
    link = classroom.join_link(code)
    st.subheader("Your class is open")
    left, right = st.columns([3, 2] if not v.presenter else [1, 1])     # the QR code beside the code, on one screen
    with left:
        st.markdown("Students open the app and join with this code:")
        st.markdown(f"# {code}")                      # letters and digits only (store.CODE_ALPHABET)
        st.markdown("or with this link:")
        st.code(link, language=None, wrap_lines=True)
    right.image(qr_png(link, 12 if v.presenter else 8), caption=f"QR code of the link to class {code}",
                width=360 if v.presenter else 260, alt=f"QR code of the link to class {code}: {link}")
    classroom.who_joined(code)                               # polled: the room joining shows as it happens
    st.caption("Move the class with Next and Previous in the class box at the top of every page. Keep this browser "
               "tab open: the teacher key lives only in it.")
    with st.popover("Your second screen", icon=":material/phonelink:",          # a secret: shown only when opened
                    help="Each question's answer and each step's note on your phone or a laptop, with Previous, Next "
                         "and Reveal"):
        second = peek.link()
        st.markdown("Open this link on your phone, or on a laptop the room cannot see: it shows each question's "
                    "answer with its number before you reveal it, and each step's note, with **Previous**, **Next** "
                    "and **Reveal**. The projector never shows the answer before you reveal it. Keep the link to "
                    "yourself: whoever has it leads the class (but cannot end it).")
        st.code(second, language=None, wrap_lines=True)
        st.image(qr_png(second, 5), width=200, caption="QR code of your second screen's link",
                 alt="QR code of your second screen's link")
    st.subheader("What the class got right")
    classroom.class_summary(code, v.name, v.text)            # polled: the answers as they come in
    with st.container(horizontal=True):
        st.button("Show the class's step", key="class_show_step", on_click=classroom.show_class_step, type="primary",
                  icon=":material/arrow_forward:", help="Students who joined already see it; come back here with "
                  "“Show the join code and QR code” in the class box.")
        st.button("End the class", key="class_end", on_click=classroom.end, icon=":material/close:")
elif role == "student":
    st.success(f"You are in class {st.session_state[classroom.CODE]}. The class box at the top of every page follows the teacher.",
               icon=":material/groups:")
    classroom.own_summary(st.session_state[classroom.CODE], v.name, v.text)
    st.button("Leave the class", key="class_leave_page", on_click=classroom.leave, icon=":material/logout:")
    st.caption("Your teacher started the lesson again with a new code (their tab was reloaded, or its server "
               "restarted)? Join it here:")
    classroom.join_form()
elif role == "alone":
    st.info("You are walking a lesson: Next and Previous are in the box at the top of every page.", icon=":material/school:")
    st.button("Stop the lesson", key="class_stop_page", on_click=classroom.leave, icon=":material/close:")
else:
    # in presenter mode (a teacher at the projector) leading comes first, one box above the other
    join, lead = st.columns(2) if not v.presenter else reversed((st.container(), st.container()))
    with join.container(border=True):
        st.subheader("Join a class")
        classroom.join_form()
    with lead.container(border=True):
        st.subheader("Lead or walk a lesson")
        ready = lessons.ready_lessons()
        built = classroom.draft()
        options = [*(["mine"] if built else []), *ready, "upload"]
        names = {"mine": f"Your lesson ({len(built)} steps)", "upload": "Upload a lesson file ..."}
        choice = st.selectbox("Lesson", options, key="class_lesson",
                              format_func=lambda k: ready[k].title if k in ready else names[k],
                              help="Build your own: on any page, open “Copy a link to this view” and press "
                                   "“Add this view to my lesson”.")
        chosen = None
        if choice == "mine":
            chosen = edit_draft(built)
        elif choice == "upload":
            upload = st.file_uploader("Lesson file (.json)", type=["json"], key="class_upload")
            if upload is not None:
                try:
                    chosen = lessons.parse(upload.getvalue())
                except lessons.LessonError as problem:
                    st.error(escape(str(problem)), icon=":material/error:")
        else:
            chosen = ready[choice]
        if chosen is not None:
            st.markdown(f"**{escape(chosen.title)}**: {len(chosen.steps)} steps, "
                        f"{sum(s.question is not None for s in chosen.steps)} with a question.")
            a, b = st.columns(2)
            a.button("Start a class", key="class_start", on_click=classroom.start, args=(chosen.to_json(), True),
                     type="primary", icon=":material/co_present:")
            b.button("Walk it alone", key="class_alone", on_click=classroom.start, args=(chosen.to_json(), False),
                     icon=":material/school:")
            st.download_button("Download this lesson", chosen.to_json(), file_name=lessons.file_name(chosen),
                               mime="application/json", key="class_download", icon=":material/download:",
                               on_click="ignore")
            with st.popover("Copy a link to this lesson", icon=":material/link:"):
                st.code(classroom.lesson_link(chosen), language=None, wrap_lines=True)
