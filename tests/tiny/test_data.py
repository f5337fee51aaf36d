"""Procedural clips, real-clip splits and the prompt-following measurement on ground truth."""

import numpy as np
import pytest

from kaleido.tiny import data as D
from kaleido.tiny.evaluate import check_prompt_following


def test_render_clip_moves_the_object_the_prompted_way():
    spec = D.ShapeSpec("red", "square", "moving", "right", "striped")
    clip, centroids = D.render_clip(spec, num_frames=17, size=64, seed=3)
    assert clip.shape == (17, 64, 64, 3) and clip.dtype == np.float32
    assert -1.0 <= clip.min() and clip.max() <= 1.0
    assert centroids[-1, 0] - centroids[0, 0] > 15  # moved right by > 15 px
    assert abs(centroids[-1, 1] - centroids[0, 1]) < 1e-4
    assert spec.prompt == "a red square moving right on a striped background"


def test_direction_groups_show_one_scene_in_every_direction():
    clips, prompts, specs = D.direction_group_batch(np.random.default_rng(1), 40, num_frames=9, size=32,
                                                    moving_fraction=1.0)
    assert clips.shape == (40, 9, 32, 32, 3) and len(prompts) == len(specs) == 40
    for g in range(0, 40, 4):
        group = specs[g : g + 4]
        assert [s.direction for s in group] == list(D.DIRECTIONS)
        assert len({(s.colour, s.shape, s.background) for s in group}) == 1
        # same background pixels (same render seed); the object ends up in four different places
        corners = clips[g : g + 4, 0, :2, :2]
        assert np.allclose(corners, corners[0])
        ends = {tuple(np.round(clips[k, -1].mean((0, 1)), 4)) for k in range(g, g + 4)}
        assert len(ends) > 1
    still = D.direction_group_batch(np.random.default_rng(1), 10, 9, 32, moving_fraction=0.0)[2]
    assert all(s.motion in ("rotating", "growing") for s in still)
    with pytest.raises(ValueError, match="moving_fraction"):
        D.direction_group_batch(np.random.default_rng(1), 4, 9, 32, moving_fraction=1.5)


def test_trail_reaches_both_procedural_samplers():
    from kaleido.tiny.latents import make_clips

    for fraction in (None, 1.0):  # independent clips, direction groups
        plain = make_clips(8, 0, "train", 3, num_frames=9, size=32, moving_fraction=fraction)
        trail = make_clips(8, 0, "train", 3, num_frames=9, size=32, moving_fraction=fraction, trail=True)
        assert plain[1] == trail[1]  # same draws
        moving = [i for i, s in enumerate(plain[2]) if s["motion"] == "moving"]
        assert moving and all(not np.array_equal(plain[0][i], trail[0][i]) for i in moving)
        still = [i for i, s in enumerate(plain[2]) if s["motion"] != "moving"]
        assert all(np.array_equal(plain[0][i], trail[0][i]) for i in still)


def test_pan_slides_the_background_against_the_motion_and_keeps_the_object_path():
    ramp = np.tile(np.arange(40, dtype=np.float32), (40, 1))[..., None]  # value = canvas x
    start = D._panned_background(ramp, 32, 1.0, 0.0, 0.0)
    later = D._panned_background(ramp, 32, 1.0, 0.0, 2.5)
    assert np.allclose(later, start + 2.5)  # camera moved right 2.5 px: what was at x + 2.5 is now at x
    assert np.allclose(D._panned_background(ramp, 32, -1.0, 0.0, 2.5), D._panned_background(ramp, 32, -1.0, 0.0, 0.0) - 2.5)
    assert np.allclose(D._panned_background(ramp, 32, 0.0, 1.0, 3.0), D._panned_background(ramp, 32, 0.0, 1.0, 0.0))

    spec = D.ShapeSpec("red", "square", "moving", "left", "striped")
    still_cam, c0 = D.render_clip(spec, 17, 64, seed=5)
    panned, c1 = D.render_clip(spec, 17, 64, seed=5, pan=True)
    assert np.array_equal(c0, c1)  # same object path on screen
    assert not np.array_equal(still_cam, panned)
    assert check_prompt_following((panned + 1) / 2, "red", "left").ok
    for fraction in (None, 1.0):  # both samplers; rotating and growing clips have a still camera
        from kaleido.tiny.latents import make_clips

        plain = make_clips(8, 0, "train", 3, num_frames=9, size=32, moving_fraction=fraction)
        pan = make_clips(8, 0, "train", 3, num_frames=9, size=32, moving_fraction=fraction, pan=True)
        assert plain[1] == pan[1]
        for i, sp in enumerate(plain[2]):
            assert np.array_equal(plain[0][i], pan[0][i]) == (sp["motion"] != "moving")


def test_swapped_prompt_changes_exactly_one_word():
    from kaleido.tiny.evaluate import swapped_prompt

    spec = D.ShapeSpec("red", "square", "moving", "up", "plain").to_dict()
    assert swapped_prompt(spec, None) == "a red square moving up on a plain background"
    assert swapped_prompt(spec, "direction") == "a red square moving down on a plain background"
    assert swapped_prompt(spec, "colour") == "a blue square moving up on a plain background"
    with pytest.raises(ValueError, match="attribute"):
        swapped_prompt(spec, "shape")
    with pytest.raises(ValueError, match="not a moving clip"):
        swapped_prompt(D.ShapeSpec("red", "square", "growing", None, "plain").to_dict(), "colour")


def test_prompt_check_passes_ground_truth_and_rejects_wrong_prompts():
    rng = np.random.default_rng(0)
    checked = 0
    while checked < 24:
        spec = D.random_spec(rng)
        if spec.motion != "moving":
            continue
        clip01 = (D.render_clip(spec, 17, 64, seed=checked)[0] + 1) / 2
        assert check_prompt_following(clip01, spec.colour, spec.direction).ok, spec.prompt
        opposite = {"left": "right", "right": "left", "up": "down", "down": "up"}[spec.direction]
        assert not check_prompt_following(clip01, spec.colour, opposite).ok
        other = next(c for c in D.COLOURS if c != spec.colour)
        assert not check_prompt_following(clip01, other, spec.direction).ok
        checked += 1


def test_prompt_check_rejects_a_static_object_and_bad_input():
    spec = D.ShapeSpec("blue", "circle", "rotating", None, "plain")
    clip01 = (D.render_clip(spec, 17, 64, seed=1)[0] + 1) / 2
    assert not check_prompt_following(clip01, "blue", "left").direction_ok
    with pytest.raises(ValueError, match="colour"):
        check_prompt_following(clip01, "mauve", "left")
    with pytest.raises(ValueError, match="clip shape"):
        check_prompt_following(clip01[:2], "blue", "left")


def test_real_clips_split_in_time_and_carphone_is_eval_only():
    train = D.split_frames("bikes", "train")
    held = D.split_frames("bikes", "heldout")
    full = D.load_real_clip("bikes")
    assert len(train) + len(held) == len(full)
    assert np.array_equal(train[-1], full[len(train) - 1]) and np.array_equal(held[0], full[len(train)])
    with pytest.raises(ValueError, match="evaluation-only"):
        D.split_frames("carphone_pristine", "train")
    window = D.real_window(train, np.random.default_rng(0), 9, 32)
    assert window.shape == (9, 32, 32, 3) and -1.0 <= window.min() and window.max() <= 1.0


def test_vocabulary_covers_every_prompt_word():
    from kaleido.tiny.build import build_tokenizer, read_vocab

    vocab = set(read_vocab())
    assert set(D.vocabulary()) <= vocab
    tok = build_tokenizer()
    ids = tok("a Purple triangle moving up on a zebra background").input_ids
    assert ids[-1] == tok.eos_token_id
    assert ids.count(tok.unk_token_id) == 1  # "zebra" is not in the vocabulary


def test_every_training_prompt_fits_the_tiny_text_length_used_in_training_and_generation():
    import itertools

    from kaleido.evaluation.generate import settings_for
    from kaleido.tiny.build import build_tokenizer
    from kaleido.tiny.pipeline import TINY_DEMO, TINY_TEXT_TOKENS
    from kaleido.tiny.train_transformer import TransformerTrainConfig

    tok = build_tokenizer()
    prompts = [D.ShapeSpec(c, s, m, d, b).prompt for c, s, m, d, b in itertools.product(
        D.COLOURS, D.SHAPES, D.MOTIONS, D.DIRECTIONS, D.BACKGROUNDS)] + list(D.REAL_PROMPTS.values())
    longest = max(len(tok(p).input_ids) for p in prompts)  # words + </s>
    assert longest <= TINY_TEXT_TOKENS
    # one length: the trainer, the demo settings and the evaluation harness all use it
    assert TransformerTrainConfig().max_sequence_length == TINY_DEMO.max_sequence_length == TINY_TEXT_TOKENS
    assert settings_for("tiny").call_kwargs()["max_sequence_length"] == TINY_TEXT_TOKENS
    assert "max_sequence_length" not in settings_for("Wan-AI/Wan2.1-T2V-1.3B-Diffusers").call_kwargs()


def test_a_prompt_longer_than_the_tiny_text_length_is_reported_not_silently_cut():
    import types
    import warnings

    import pytest

    from kaleido.evaluation.generate import warn_if_truncated
    from kaleido.tiny.build import build_tokenizer
    from kaleido.tiny.pipeline import TINY_TEXT_TOKENS

    pipe = types.SimpleNamespace(tokenizer=build_tokenizer())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_truncated(pipe, "a red circle moving left on a plain background", TINY_TEXT_TOKENS)
    long = " ".join(["a red circle"] * 6)  # 18 words + </s>
    with pytest.warns(UserWarning, match=f"19 tokens but this model reads only the first {TINY_TEXT_TOKENS}"):
        warn_if_truncated(pipe, long, TINY_TEXT_TOKENS)
