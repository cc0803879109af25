"""Source -> target tasks (model/tasks.py): the digits tasks, and French that obeys its grammar."""
import pytest
import torch
import torch.nn.functional as F

from model import tasks
from model.seq2seq import EncoderDecoder
from model.config import ModelConfig
from model.trainer import PairTrainer, TrainConfig

GENDER = {n.french: n.gender for n in tasks.NOUNS} | {n.french_plural: n.gender for n in tasks.NOUNS}
PLURAL_NOUNS = {n.french_plural for n in tasks.NOUNS}
SINGULAR_NOUNS = {n.french for n in tasks.NOUNS}
BEFORE = {form: a for a in tasks.ADJECTIVES if a.before_noun for form in a.forms}
AFTER = {form: a for a in tasks.ADJECTIVES if not a.before_noun for form in a.forms}
VERB_PLURAL = {v.french_plural: True for v in tasks.VERBS} | {v.french: False for v in tasks.VERBS}
ENGLISH_VERB_PLURAL = {v.plural: True for v in tasks.VERBS} | {v.english: False for v in tasks.VERBS}


def parse_phrase(words: list[str]) -> tuple[str, bool, list[str]]:
    """(gender, plural) of the French noun phrase at the start of `words` (article, perhaps an adjective that
    goes before the noun, the noun, perhaps a colour), checking its agreement; the rest."""
    article, rest = words[0], words[1:]
    before = BEFORE.get(rest[0])
    if before:
        rest = rest[1:]
    noun, rest = rest[0], rest[1:]
    gender = GENDER[noun]
    plural = article == "les"
    assert noun in (PLURAL_NOUNS if plural else SINGULAR_NOUNS) or noun == "souris", (article, noun)
    if not plural:
        assert article in ({"le", "un"} if gender == "m" else {"la", "une"}), (article, noun)
    for adjective, form in ((before, words[1]), (AFTER.get(rest[0]) if rest else None, rest[0] if rest else None)):
        if adjective:
            assert form == adjective.forms[(gender == "f") + 2 * plural], (noun, form)
    if rest and rest[0] in AFTER:
        rest = rest[1:]
    return gender, plural, rest


def test_every_french_sentence_agrees_in_gender_and_number():
    for english, french in tasks.pairs("translate", 2_000, seed=0):
        words = french.split()
        _, plural, rest = parse_phrase(words)
        verb = rest[0]
        assert VERB_PLURAL[verb] == plural, (english, french)            # the verb agrees with its subject
        if len(rest) > 1:
            _, _, after = parse_phrase(rest[1:])
            assert after == [], french
        # the English verb says the same number
        english_verb = next(w for w in english.split() if w in ENGLISH_VERB_PLURAL)
        assert ENGLISH_VERB_PLURAL[english_verb] == plural, (english, french)


def test_colours_go_after_the_noun_and_the_word_order_flips():
    assert tasks.translate("the red cat sleeps") == "le chat rouge dort"
    assert tasks.translate("the green cars run") == "les voitures vertes courent"
    assert tasks.translate("a white mouse eats") == "une souris blanche mange"
    assert {a.english for a in tasks.ADJECTIVES if not a.before_noun} == {"red", "green", "black", "white", "blue",
                                                                          "grey"}


@pytest.mark.parametrize("english, forms", [
    ("small", ("petit", "petite", "petits", "petites")), ("big", ("grand", "grande", "grands", "grandes")),
    ("young", ("jeune", "jeune", "jeunes", "jeunes")), ("old", ("vieux", "vieille", "vieux", "vieilles")),
    ("good", ("bon", "bonne", "bons", "bonnes")), ("pretty", ("joli", "jolie", "jolis", "jolies")),
])
def test_six_adjectives_go_before_the_noun_and_agree_in_all_four_forms(english, forms):
    [adjective] = [a for a in tasks.ADJECTIVES if a.english == english]
    assert adjective.before_noun and adjective.forms == forms
    a = "an" if english == "old" else "a"                             # English writes "an old cat"
    assert tasks.translate(f"{a} {english} cat sleeps") == f"un {forms[0]} chat dort"
    assert tasks.translate(f"{a} {english} cow sleeps") == f"une {forms[1]} vache dort"
    assert tasks.translate(f"the {english} cats sleep") == f"les {forms[2]} chats dorment"
    assert tasks.translate(f"the {english} cows sleep") == f"les {forms[3]} vaches dorment"
    assert tasks.translate(f"{'a' if a == 'an' else 'an'} {english} cat sleeps") is None


def test_both_kinds_of_adjective_in_one_noun_phrase_one_before_and_one_after_the_noun():
    assert tasks.translate("the small red cat sleeps") == "le petit chat rouge dort"
    assert tasks.translate("The Old White Cows See A Pretty Green Mouse") == \
        "les vieilles vaches blanches voient une jolie souris verte"
    assert tasks.translate("the red small cat sleeps") is None            # English puts the colour last
    made = tasks.pairs("translate", 2_000, seed=0)
    both = [e for e, _ in made if any(f"{b.english} {c.english} " in e for b in tasks.BEFORE_NOUN
                                        for c in tasks.COLOURS)]
    only_before = [e for e, _ in made if any(f" {b.english} {n.english} " in f" {e} " or
                                              f" {b.english} {n.plural} " in f" {e} "
                                              for b in tasks.BEFORE_NOUN for n in tasks.NOUNS)]
    assert len(both) > 100 and len(only_before) > 100                      # the data has every shape


def test_the_longest_sentence_fits_the_models_positions():
    from model.presets import SEQ2SEQ_PRESETS
    longest = "the small red cats follow the big white dogs"                  # two nouns, two adjectives each
    french = tasks.translate(longest)
    assert french == "les petits chats rouges suivent les grands chiens blancs"
    tok = tasks.tokenizer_for("translate")
    for preset in SEQ2SEQ_PRESETS.values():
        tasks.encode_pairs(tok if preset.task == "translate" else tasks.tokenizer_for(preset.task),
                           [(longest, french)] if preset.task == "translate" else
                           [(" ".join("9" * preset.lengths[1]), " ".join("9" * preset.lengths[1]))],
                           preset.model["max_len"])                          # raises when it does not fit
    assert max(len(e.split()) for e, _ in tasks.pairs("translate", 5_000)) == len(longest.split())


def test_digit_tasks_sort_and_reverse_and_held_out_pairs_are_new():
    for source, target in tasks.pairs("sort", 200):
        assert target.split() == sorted(source.split())
    for source, target in tasks.pairs("reverse", 200):
        assert target.split() == source.split()[::-1]
    train = tasks.pairs("translate", 3_000)
    test = tasks.held_out("translate", 300, train)
    assert len(test) == 300 and not {s for s, _ in test} & {s for s, _ in train}
    assert tasks.pairs("sort", 50, seed=4) == tasks.pairs("sort", 50, seed=4) != tasks.pairs("sort", 50, seed=5)
    with pytest.raises(ValueError, match="unknown task"):
        tasks.pairs("poetry", 3)


def test_encoded_pairs_are_padded_with_bos_and_eos_around_each_target():
    tok = tasks.tokenizer_for("translate")
    assert tok.vocab[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    data = [("the cat sleeps", "le chat dort"), ("a green car runs", "une voiture verte court")]
    sources, targets = tasks.encode_pairs(tok, data, max_len=10)
    assert sources.shape == (2, 4) and targets.shape == (2, 6)
    assert tok.decode(sources[0, :3].tolist()) == "the cat sleeps" and sources[0, 3] == 1          # <pad>
    assert targets[0].tolist()[:5] == [2, *tok.encode("le chat dort"), 3] and targets[0, 5] == 1   # <bos> ... <eos>
    assert not any(tok.unk_id in tok.encode(s + " " + t) for s, t in tasks.pairs("translate", 500))
    with pytest.raises(ValueError, match="needs 6 positions"):
        tasks.encode_pairs(tok, data, max_len=5)


def test_noam_schedule_and_label_smoothing_equal_their_formulas():
    cfg = TrainConfig(schedule="noam", lr=1.0, warmup=400)
    for step in (1, 10, 399, 400, 401, 5_000):
        assert cfg.lr_at(step, 64) == pytest.approx(64 ** -0.5 * min(step ** -0.5, step * 400 ** -1.5))
    assert max(range(1, 2000), key=lambda s: cfg.lr_at(s, 64)) == 400       # the peak is at the end of warmup
    with pytest.raises(ValueError, match="d_model"):
        cfg.lr_at(3)
    logits, labels, eps = torch.randn(6, 9), torch.tensor([0, 3, 8, 2, 2, 5]), 0.1
    logp = logits.log_softmax(-1)
    by_hand = ((1 - eps) * -logp[range(6), labels] + eps * -logp.mean(-1)).mean()
    assert float(F.cross_entropy(logits, labels, label_smoothing=eps)) == pytest.approx(float(by_hand), abs=1e-6)


def test_teacher_forcing_learns_to_reverse_three_digits_and_ignores_padding():
    tok = tasks.tokenizer_for("reverse")
    data = [(" ".join(d), " ".join(d[::-1])) for d in ("123", "456", "789", "1234")]
    train = tasks.encode_pairs(tok, data, 8)
    torch.manual_seed(0)
    model = EncoderDecoder(ModelConfig(vocab_size=tok.vocab_size, d_model=32, n_heads=2, n_layers=1, d_ff=64,
                                       max_len=8, pos="learned"))
    trainer = PairTrainer(model, train, train, TrainConfig(steps=150, batch_size=8, lr=3e-3, warmup=10))
    (inputs, labels) = trainer.batch()
    assert inputs[1][:, 0].eq(2).all() and (labels == -100).any()        # <bos> read first; padding not learned
    first = trainer.evaluate()[0]
    trainer.step(150)
    loss, acc = trainer.evaluate()
    assert loss < 0.2 * first and acc == 1.0
    flow = trainer.gradient_flow()
    assert "decoder_blocks.0.cross_attn.W_q.weight" in flow and all(m <= x for m, x in flow.values())
    assert {"encoder_embed", "encoder_blocks.0", "decoder_blocks.0", "unembed"} <= set(trainer.grad_norms())


def test_the_grammar_answers_its_own_sentences_and_nothing_else():
    for english, french in tasks.pairs("translate", 3_000, seed=7):
        assert tasks.answer("translate", english) == french
    assert tasks.answer("translate", "the cat sleeps quickly") is None
    assert tasks.answer("translate", "the cats sleeps") is None                  # no agreement, no answer
    assert tasks.answer("translate", "my name is Sara") is None
    assert tasks.answer("sort", "3 1 2") == "1 2 3" and tasks.answer("reverse", "3 1 2") == "2 1 3"
    assert tasks.answer("sort", "3 x 2") is None


def test_exact_match_in_one_teacher_forced_pass_equals_greedy_decoding():
    from model.checkpoint import load_bundled
    from model.seq2seq import exact_match
    bundle = load_bundled("translate")
    data = tasks.pairs("translate", 300, seed=11)
    trainer = PairTrainer(bundle.model, tasks.encode_pairs(bundle.tokenizer, data, 12),
                          tasks.encode_pairs(bundle.tokenizer, data, 12), TrainConfig())
    bundle.model.eval()
    assert trainer.exact_match(300) == pytest.approx(exact_match(bundle, data), abs=1e-9)


def test_digit_lists_have_the_lengths_of_the_recipe_and_the_lab_keeps_its_default():
    lengths = {len(s.split()) for s, _ in tasks.pairs("sort", 2_000, seed=0, lengths=(1, 10))}
    assert lengths == set(range(1, 11))
    assert {len(s.split()) for s, _ in tasks.pairs("sort", 2_000, seed=0)} == set(range(3, 9))     # (3, 8)
    assert tasks.pairs("sort", 50, 2) == tasks.pairs("sort", 50, 2, lengths=(3, 8))
    with pytest.raises(ValueError, match="lengths"):
        tasks.pairs("sort", 3, lengths=(0, 4))
    train = tasks.pairs("sort", 20_000, lengths=(1, 10))
    seen = {s for s, _ in train}
    assert len(tasks.length_test("sort", 2, train)) == 100                        # every list of two digits
    long = tasks.length_test("sort", 7, train)
    assert len(long) == 200 and not {s for s, _ in long} & seen and {len(s.split()) for s, _ in long} == {7}
    assert all(t == tasks.answer("sort", s) for s, t in long)
    assert tasks.training_data("sort", 20_000, (1, 10)) == \
        "20,000 random lists of 1 to 10 digits and their sorted versions"
    assert tasks.training_data("translate", 20_000) == \
        "20,000 sentences of a small English grammar (12 nouns, 12 adjectives, 8 verbs) with their French"


def test_the_lexicon_has_one_row_per_word_with_what_a_student_needs():
    rows = tasks.lexicon("translate")
    assert len(rows) == len(tasks.NOUNS) + len(tasks.ADJECTIVES) + len(tasks.VERBS) + 2          # + the, a/an
    by_word = {r["English"]: r for r in rows}
    assert by_word["mouse"] == {"kind": "noun", "English": "mouse", "English plural": "mice", "French": "souris",
                                "French plural": "souris", "gender": "feminine", "grammar": ""}
    assert by_word["horse"]["French plural"] == "chevaux" and by_word["horse"]["gender"] == "masculine"
    assert by_word["old"]["kind"] == "adjective" and by_word["old"]["grammar"] == "before the noun"
    assert (by_word["old"]["French"], by_word["old"]["French plural"]) == ("vieux / vieille", "vieux / vieilles")
    assert by_word["red"]["grammar"] == "after the noun"
    assert by_word["sees"]["grammar"] == "takes an object" and by_word["sleeps"]["grammar"] == "no object"
    assert (by_word["sleeps"]["English plural"], by_word["sleeps"]["French plural"]) == ("sleep", "dorment")
    assert [r["English"] for r in rows if r["kind"] == "article"] == ["the", "a / an"]
    assert sum(r["grammar"] == "before the noun" for r in rows) == 6 == sum(r["grammar"] == "after the noun"
                                                                            for r in rows)
    french = {f.strip() for r in rows for col in ("French", "French plural") for f in r[col].split("/") if f.strip()}
    english = {w.strip() for r in rows for col in ("English", "English plural") for w in r[col].split("/") if w.strip()}
    typeable = set(tasks.tokenizer_for("translate").vocab[4:])
    assert french | english == typeable                                       # every word the model reads, listed
    assert tasks.lexicon("sort") == [{"kind": "digit", "token": d} for d in "0123456789"] == tasks.lexicon("reverse")


# --- is a typed source inside what the model learned? -------------------------------------------------------

@pytest.mark.parametrize("source", ["The Red Cat Sleeps", "the red cat sleeps.", "THE SMALL RED CAT SEES THE BIG DOG!",
                                    "an old cow eats?", "  the cats run  "])
def test_a_sentence_of_the_grammar_is_inside_whatever_its_case_and_final_mark(source):
    check = tasks.check_source("translate", source)
    assert check == tasks.SourceCheck((), tasks.translate(tasks.strip_final_punctuation(source)[0]), ())
    assert check.answer is not None and check.inside


def test_unknown_words_are_named_in_order_once_and_the_sentence_is_outside_the_grammar():
    check = tasks.check_source("translate", "I love pizza")
    assert check.unknown == ("i", "love", "pizza") and check.answer is None
    assert check.problems == (
        "“i”, “love” and “pizza” are not in the model's vocabulary: it learned 12 nouns, 12 adjectives, 8 verbs and "
        "the articles “the”, “a” and “an”.",
        "This is not a sentence the grammar makes, so there is no right French to compare with.")
    check = tasks.check_source("translate", "the purple cat sleeps")
    assert check.unknown == ("purple",) and check.answer is None
    assert check.problems[0].startswith("“purple” is not in the model's vocabulary")
    assert tasks.check_source("translate", "the zebra sees the zebra").unknown == ("zebra",)


@pytest.mark.parametrize("source, why", [
    ("the cat sleep", "“sleep” does not agree with “the cat”: the grammar writes “the cat sleeps”."),
    ("the cats sees a dog", "“sees” does not agree with “the cats”: the grammar writes “the cats see”."),
    ("the red small cat sleeps", "“red small”: English puts “small” before the colour (“small red”)."),
    ("a old cat sleeps", "English writes “an old”, not “a old”."),
    ("a cats sleep", "“a” is for one thing and “cats” is plural: the grammar writes “the cats”."),
    ("cat sleeps", "“cat” needs an article before it: the grammar's noun phrases start with “the”, “a” or “an” "
                   "(“the cat”)."),
    ("the cat", "After “the cat” the grammar needs a verb (“the cat sleeps”)."),
    ("the cat sees", "“sees” needs an object in the grammar (“the cat sees a dog”)."),
    ("the cat sleeps the dog", "“sleeps” takes no object in the grammar, so the sentence ends there; “the dog” is "
                               "more."),
    ("the red green cat sleeps", "“red green”: the grammar puts at most one colour in a noun phrase."),
])
def test_known_words_the_grammar_does_not_put_together_say_why(source, why):
    check = tasks.check_source("translate", source)
    assert check.unknown == () and check.answer is None
    assert check.problems == ("Every word is in the model's vocabulary, but this is not a sentence its grammar makes.",
                              why)


def test_french_typed_as_the_source_is_named_as_french():
    check = tasks.check_source("translate", "le chat dort")
    assert check.unknown == () and check.answer is None
    assert check.problems[0] == "“le”, “chat” and “dort” are French: the model reads English and writes French."


@pytest.mark.parametrize("source, lengths, unknown, answer, problem", [
    ("12 3", (1, 10), ("12",), None,
     "“12” is a two-digit number: the model reads one digit at a time, separated by spaces (“1 2”)."),
    ("hello", (1, 10), ("hello",), None,
     "“hello” is not a digit: the model reads only the digits 0 to 9, separated by spaces."),
    ("3 1 4 1 5 9 2 6 5 3 5", (1, 10), (), "1 1 2 3 3 4 5 5 5 6 9",
     "11 digits: the model was trained on lists of 1 to 10 digits."),
    ("4 2", (3, 8), (), "2 4", "2 digits: the model was trained on lists of 3 to 8 digits."),
    ("7", (3, 8), (), "7", "1 digit: the model was trained on lists of 3 to 8 digits."),
    ("", (1, 10), (), None, "The source is empty: the model needs digits separated by spaces, such as “3 1 2”."),
    ("   ", None, (), None, "The source is empty: the model needs digits separated by spaces, such as “3 1 2”."),
])
def test_a_digit_source_outside_what_the_model_learned_says_why(source, lengths, unknown, answer, problem):
    check = tasks.check_source("sort", source, lengths)
    assert check == tasks.SourceCheck(unknown, answer, (problem,))


def test_a_digit_source_inside_the_trained_lengths_has_its_answer_and_no_problem():
    assert tasks.check_source("sort", "3 1 2", (1, 10)) == tasks.SourceCheck((), "1 2 3", ())
    assert tasks.check_source("reverse", "3 1 2.", (3, 8)) == tasks.SourceCheck((), "2 1 3", ())
    assert tasks.check_source("sort", " ".join("9876543210"), (1, 10)).inside
    assert tasks.check_source("sort", "3 1 4 1 5 9 2 6 5 3 5").inside                  # lengths not recorded
    assert tasks.check_source("translate", "").problems == (
        "The source is empty: the model needs an English sentence such as “the red cat sleeps”.",)


@pytest.mark.parametrize("text, expected", [
    ("The Red Cat Sleeps.", ("The Red Cat Sleeps", ".")), ("is it?", ("is it", "?")), ("hi", ("hi", None)),
    (".", (".", None)), ("", ("", None)), ("a b !  ", ("a b", "!")), ("wow!!", ("wow!", "!")),
])
def test_one_final_mark_is_taken_off(text, expected):
    assert tasks.strip_final_punctuation(text) == expected
