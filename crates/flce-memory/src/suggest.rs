//! Which of `flce.patch`'s memory options a request needs: the first rung of a ladder, ordered by
//! what each option costs in step time, whose planned peak fits the GPU at the requested length.
//!
//! The ladder (flce's loss on every rung, each rung keeping the options before it): nothing
//! (activations kept); checkpointing; offload of the layer inputs (its copies overlap compute:
//! ~0.2–0.4% a step on the H200, BENCHMARKS.md); 4 MLP tiles (a few % at long contexts); 4 norm
//! tiles; 8 tiles of each; with LoRA the frozen layer weights streamed from host memory
//! (host→device copies of every layer's weights three times a step; not yet measured); 16 tiles.

use crate::estimate::{estimate, Activations, Breakdown, Loss};
use crate::model::Model;
use crate::report::Request;

/// One rung: the options, in `flce.patch`'s terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchOptions {
    pub activations: Activations,
    pub mlp_tiles: u64,
    pub norm_tiles: u64,
    pub stream_weights: bool,
}

impl PatchOptions {
    /// `req` with these options' tiles and streaming (the activations are the setup's).
    pub fn request(&self, req: &Request) -> Request {
        Request {
            mlp_tiles: self.mlp_tiles,
            norm_tiles: self.norm_tiles,
            stream_weights: self.stream_weights,
            ..req.clone()
        }
    }

    /// The planned breakdown of flce's loss with these options at `req`'s length.
    pub fn estimate(&self, model: &Model, req: &Request) -> Breakdown {
        estimate(model, &self.request(req).setup(Loss::Flce, self.activations, req.seq_len))
    }

    /// The `flce.patch(...)` call that sets these options.
    pub fn python_call(&self) -> String {
        let mut args = vec!["model".to_string()];
        if self.activations != Activations::Kept {
            args.push("checkpoint=True".into());
        }
        if self.activations == Activations::Offloaded {
            args.push("offload=True".into());
        }
        if self.mlp_tiles > 1 {
            args.push(format!("mlp_tiles={}", self.mlp_tiles));
        }
        if self.norm_tiles > 1 {
            args.push(format!("norm_tiles={}", self.norm_tiles));
        }
        if self.stream_weights {
            args.push("stream_weights=True".into());
        }
        format!("flce.patch({})", args.join(", "))
    }
}

/// The ladder for `req` (streaming only with LoRA: a full fine-tune has no frozen weights).
pub fn ladder(req: &Request) -> Vec<PatchOptions> {
    let rung = |activations, tiles, norm_tiles, stream_weights| PatchOptions {
        activations,
        mlp_tiles: tiles,
        norm_tiles,
        stream_weights,
    };
    let (kept, ckpt, off) = (Activations::Kept, Activations::Checkpointed, Activations::Offloaded);
    let mut rungs = vec![
        rung(kept, 1, 1, false),
        rung(ckpt, 1, 1, false),
        rung(off, 1, 1, false),
        rung(off, 4, 1, false),
        rung(off, 4, 4, false),
        rung(off, 8, 8, false),
    ];
    if req.lora_rank.is_some() {
        rungs.push(rung(off, 8, 8, true));
        rungs.push(rung(off, 16, 16, true));
    } else {
        rungs.push(rung(off, 16, 16, false));
    }
    rungs
}

/// The first rung of [`ladder`] whose planned peak fits `req.gpu_bytes` at `req.seq_len`, with its
/// breakdown; or None, with the last rung's breakdown (the least memory the ladder reaches).
pub fn suggest(model: &Model, req: &Request) -> (Option<PatchOptions>, Breakdown) {
    let rungs = ladder(req);
    for o in &rungs {
        let b = o.estimate(model, req);
        if b.peak <= req.gpu_bytes {
            return (Some(*o), b);
        }
    }
    (None, rungs.last().expect("a ladder has rungs").estimate(model, req))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemma_lora(seq: u64) -> (Model, Request) {
        (Model::built_in("Gemma-2-2B").unwrap(), Request::new(10.0, seq, 1, "adamw", 16).unwrap())
    }

    #[test]
    fn the_suggestion_is_the_cheapest_rung_that_fits() {
        // Gemma-2-2B LoRA on 10 GiB: short contexts need nothing past checkpointing, longer ones
        // climb the ladder, and 64k needs the streamed weights (on the H200 the planner's longest
        // with them, 73,728 tokens, ran: tests.rs)
        let cases = [(512u64, Activations::Kept, 1u64, 1u64, false), (8192, Activations::Checkpointed, 1, 1, false)];
        for (seq, act, tiles, norms, stream) in cases {
            let (m, req) = gemma_lora(seq);
            let (o, b) = suggest(&m, &req);
            assert_eq!(
                o,
                Some(PatchOptions { activations: act, mlp_tiles: tiles, norm_tiles: norms, stream_weights: stream })
            );
            assert!(b.peak <= req.gpu_bytes);
        }
        let rung = |seq| suggest(&gemma_lora(seq).0, &gemma_lora(seq).1).0.unwrap();
        let ladder_index = |seq| ladder(&gemma_lora(seq).1).iter().position(|o| *o == rung(seq)).unwrap();
        // longer contexts never take an earlier rung
        let seqs = [512u64, 1024, 8192, 16_384, 24_576, 31_232, 49_152, 65_536];
        for w in seqs.windows(2) {
            assert!(ladder_index(w[0]) <= ladder_index(w[1]), "{w:?}");
        }
        assert_eq!(
            rung(31_232),
            PatchOptions { activations: Activations::Offloaded, mlp_tiles: 4, norm_tiles: 4, stream_weights: false }
        );
        assert!(rung(65_536).stream_weights);
        // and every rung before the suggestion does not fit
        for seq in seqs {
            let (m, req) = gemma_lora(seq);
            let i = ladder_index(seq);
            for o in &ladder(&req)[..i] {
                assert!(o.estimate(&m, &req).peak > req.gpu_bytes, "{seq} {o:?}");
            }
        }
    }

    #[test]
    fn nothing_fits_past_the_last_rung() {
        let (m, req) = gemma_lora(1 << 20);
        let (o, b) = suggest(&m, &req);
        assert_eq!(o, None);
        assert!(b.peak > req.gpu_bytes);
        // a full fine-tune's ladder has no streaming rung
        let full = Request::new(80.0, 8192, 1, "adamw", 0).unwrap();
        assert!(ladder(&full).iter().all(|o| !o.stream_weights));
    }

    #[test]
    fn the_python_call_names_each_option() {
        let o = PatchOptions { activations: Activations::Offloaded, mlp_tiles: 8, norm_tiles: 8, stream_weights: true };
        assert_eq!(
            o.python_call(),
            "flce.patch(model, checkpoint=True, offload=True, mlp_tiles=8, norm_tiles=8, stream_weights=True)"
        );
        let kept = PatchOptions { activations: Activations::Kept, mlp_tiles: 1, norm_tiles: 1, stream_weights: false };
        assert_eq!(kept.python_call(), "flce.patch(model)");
    }
}
