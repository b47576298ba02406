"""flce.plan: the training-memory planner (crates/flce-memory) from Python — its rows, errors, tile
options and chart."""

import pytest

import flce


def test_memory_plan_names_the_longest_context():
    rows = flce.plan("Gemma-2-2B", gpu_gb=10, seq=8192, lora_rank=16, print_table=False)
    assert len(rows) == 9
    by = {(r["loss"], r["activations"]): r for r in rows}
    flce_ckpt = by[("flce", "checkpointing")]
    plain_ckpt = by[("PyTorch", "checkpointing")]
    assert flce_ckpt["fits"] and not plain_ckpt["fits"]
    assert flce_ckpt["longest_seq"] > plain_ckpt["longest_seq"]
    assert by[("flce", "checkpointing + offload")]["longest_seq"] >= flce_ckpt["longest_seq"]
    with pytest.raises(ValueError, match="unknown model"):
        flce.plan("GPT-5", print_table=False)
    # the MLPs in token tiles (flce.patch(..., mlp_tiles=8)): less to recompute, longer contexts
    untiled = {(r["loss"], r["activations"]): r
               for r in flce.plan("Gemma-2-2B", gpu_gb=10, seq=12288, lora_rank=16, print_table=False)}
    tiled = {(r["loss"], r["activations"]): r
             for r in flce.plan("Gemma-2-2B", gpu_gb=10, seq=12288, lora_rank=16, print_table=False, mlp_tiles=8)}
    key = ("flce", "checkpointing + offload")
    assert tiled[key]["recompute"] < untiled[key]["recompute"]
    assert tiled[key]["longest_seq"] > untiled[key]["longest_seq"]
    with pytest.raises(ValueError, match="tile count"):
        flce.plan("Gemma-2-2B", print_table=False, mlp_tiles=0)
    # and the layers' norms too (flce.patch(..., norm_tiles=4)): 4h fewer bytes a token and norm held
    normed = {(r["loss"], r["activations"]): r
              for r in flce.plan("Gemma-2-2B", gpu_gb=10, seq=12288, lora_rank=16, print_table=False, mlp_tiles=8,
                                 norm_tiles=4)}
    assert normed[key]["recompute"] < tiled[key]["recompute"]
    assert normed[key]["longest_seq"] > tiled[key]["longest_seq"]
    with pytest.raises(ValueError, match="norm tile count"):
        flce.plan("Gemma-2-2B", print_table=False, norm_tiles=0)
    # sdpa's dense sliding-window mask (transformers <= 5.17): shorter (flash / flex by default)
    sdpa = {(r["loss"], r["activations"]): r
            for r in flce.plan("Gemma-2-2B", gpu_gb=10, seq=12288, lora_rank=16, print_table=False, mlp_tiles=8,
                               attention="sdpa")}
    assert sdpa[key]["longest_seq"] < tiled[key]["longest_seq"]
    with pytest.raises(ValueError, match="attention"):
        flce.plan("Gemma-2-2B", print_table=False, attention="eager")


def test_memory_plan_draws_its_chart(tmp_path):
    path = tmp_path / "mem.svg"
    flce.plan("Qwen2.5-0.5B", gpu_gb=10, lora_rank=0, print_table=False, plot=str(path))
    text = path.read_text()
    assert text.startswith("<svg") and text.count("<polyline") == 9 and "GPU 10 GiB" in text
    # a .png path: the same chart rasterised (960 × 560, IHDR's width and height)
    png = tmp_path / "mem.png"
    flce.plan("Qwen2.5-0.5B", gpu_gb=10, lora_rank=0, print_table=False, plot=str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (960, 560)


def test_memory_plan_with_streamed_weights():
    # flce.patch(..., stream_weights=True): LoRA's frozen layer weights from pinned host memory
    key = ("flce", "checkpointing + offload")
    rows = {s: {(r["loss"], r["activations"]): r
                for r in flce.plan("Gemma-2-2B", gpu_gb=10, seq=65536, lora_rank=16, print_table=False,
                                   mlp_tiles=8, norm_tiles=8, stream_weights=s)} for s in (False, True)}
    assert rows[True][key]["weights"] < rows[False][key]["weights"] / 2
    assert rows[True][key]["longest_seq"] >= 65536 > rows[False][key]["longest_seq"]
    full = {s: flce.plan("Gemma-2-2B", gpu_gb=80, seq=8192, lora_rank=0, print_table=False, stream_weights=s)
            for s in (False, True)}
    assert full[False] == full[True]  # a full fine-tune has no frozen weights to stream


def test_suggest_names_the_cheapest_options_that_fit():
    short = flce.suggest("Gemma-2-2B", gpu_gb=10, seq=8192, lora_rank=16)
    assert short["fits"] and short["options"] == dict(checkpoint=True, offload=False, mlp_tiles=1, norm_tiles=1,
                                                      stream_weights=False)
    assert short["patch"] == "flce.patch(model, checkpoint=True)" and short["peak"] <= 10 * 2**30
    # the planner's (and the H200's) longest with norm tiles
    assert flce.suggest("Gemma-2-2B", gpu_gb=10, seq=31232, lora_rank=16)["options"] == dict(
        checkpoint=True, offload=True, mlp_tiles=4, norm_tiles=4, stream_weights=False)
    far = flce.suggest("Gemma-2-2B", gpu_gb=10, seq=1 << 20, lora_rank=16)
    assert not far["fits"] and far["peak"] > 10 * 2**30 and far["options"]["stream_weights"]
    with pytest.raises(ValueError, match="unknown model"):
        flce.suggest("GPT-5")
