import pytest
import torch


@pytest.fixture(scope="session")
def random_pipe():
    """A tiny random WanPipeline (2 blocks, 80 video tokens) and its call kwargs."""
    from kaleido.compare.pipelines import load_pipeline

    pipe, call = load_pipeline("random-wan")
    call = dict(call, max_sequence_length=16)
    return pipe, call


@pytest.fixture(scope="session")
def generate(random_pipe):
    pipe, call = random_pipe

    def run(**overrides):
        kw = dict(call, **overrides)
        return pipe(prompt="a red ball", generator=torch.Generator().manual_seed(0), output_type="np", **kw).frames[0]

    return run


@pytest.fixture(scope="session")
def dense_frames(generate):
    return generate()
