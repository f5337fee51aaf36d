"""default_config: the packaged config calibrated for a model, else KaleidoConfig()."""

from kaleido.techniques.kaleido_reuse.config import KaleidoConfig, default_config, packaged_configs
from kaleido.tiny.pipeline import TINY_VARIANTS


def test_a_tiny_variant_gets_its_calibrated_packaged_config():
    assert TINY_VARIANTS["tiny"].config in packaged_configs()
    assert default_config("tiny").to_dict() == KaleidoConfig.load(TINY_VARIANTS["tiny"].config).to_dict()
    assert default_config("tiny").to_dict() != KaleidoConfig().to_dict()


def test_a_model_without_a_packaged_config_gets_the_generic_one():
    assert TINY_VARIANTS["tiny-96"].config is None
    for model in ("tiny-96", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "/some/folder"):
        assert default_config(model).to_dict() == KaleidoConfig().to_dict()
