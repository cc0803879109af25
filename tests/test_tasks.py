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
ADJ = {form: (i % 2 == 1, i >= 2) for a in tasks.ADJECTIVES for i, form in enumerate(a.forms)}   # (feminine, plural)
VERB_PLURAL = {v.french_plural: True for v in tasks.VERBS} | {v.french: False for v in tasks.VERBS}
ENGLISH_VERB_PLURAL = {v.plural: True for v in tasks.VERBS} | {v.english: False for v in tasks.VERBS}


def parse_phrase(words: list[str]) -> tuple[str, bool, list[str]]:
    """(gender, plural) of the French noun phrase at the start of `words`, checking its agreement; the rest."""
    article, noun, rest = words[0], words[1], words[2:]
    gender = GENDER[noun]
    plural = article == "les"
    assert noun in (PLURAL_NOUNS if plural else SINGULAR_NOUNS) or noun == "souris", (article, noun)
    if not plural:
        assert article in ({"le", "un"} if gender == "m" else {"la", "une"}), (article, noun)
    if rest and rest[0] in ADJ and rest[0] not in VERB_PLURAL:
        feminine, adj_plural = ADJ[rest[0]]
        forms = next(a.forms for a in tasks.ADJECTIVES if rest[0] in a.forms)
        assert rest[0] == forms[(gender == "f") + 2 * plural], (noun, rest[0])
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


def test_the_red_cat_sleeps_and_word_order_flips():
    seen = {e: f for e, f in tasks.pairs("translate", 20_000, seed=3)}
    assert seen.get("the red cat sleeps") == "le chat rouge dort"
    assert seen.get("the green cars run") == "les voitures vertes courent"
    assert seen.get("a white mouse eats") == "une souris blanche mange"


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
