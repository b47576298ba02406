//! Model shapes: the built-in decoder models and Hugging Face `config.json` files, and their
//! parameter counts.

use std::path::Path;

use crate::PlanError;

/// The shape of a decoder-only transformer (Llama / Qwen 2 / Gemma 2 family).
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub name: String,
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub intermediate: u64,
    pub vocab: u64,
    /// The LM head shares the embedding matrix.
    pub tied_embeddings: bool,
    /// Biases on the q, k, v projections (Qwen 2).
    pub qkv_bias: bool,
    /// RMSNorms per layer: 2 (Llama, Qwen), 4 (Gemma 2: pre/post attention and feed-forward).
    pub norms_per_layer: u64,
    /// The final logits are soft-capped (Gemma 2: 30), which flce's loss takes as an option.
    pub final_softcap: Option<f64>,
    /// Sliding-window attention layers (Gemma 2: 4096 tokens): past the window Hugging Face's
    /// sdpa path builds a dense [T, T] mask (the estimate's T² terms).
    pub sliding_window: Option<u64>,
}

/// name, hidden, layers, heads, kv heads, head dim, intermediate, vocab, tied, qkv bias, norms,
/// final softcap, sliding window (from each model's published config.json; Qwen 2.5's configs
/// name a window but do not use it).
type Row = (&'static str, u64, u64, u64, u64, u64, u64, u64, bool, bool, u64, Option<f64>, Option<u64>);
const BUILT_IN: [Row; 7] = [
    ("Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 128_256, true, false, 2, None, None),
    ("Llama-3.1-8B", 4096, 32, 32, 8, 128, 14_336, 128_256, false, false, 2, None, None),
    ("Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 151_936, true, true, 2, None, None),
    ("Qwen2.5-1.5B", 1536, 28, 12, 2, 128, 8960, 151_936, true, true, 2, None, None),
    ("Qwen2.5-7B", 3584, 28, 28, 4, 128, 18_944, 152_064, false, true, 2, None, None),
    ("Gemma-2-2B", 2304, 26, 8, 4, 256, 9216, 256_000, true, false, 4, Some(30.0), Some(4096)),
    ("Gemma-2-9B", 3584, 42, 16, 8, 256, 14_336, 256_000, true, false, 4, Some(30.0), Some(4096)),
];

impl Model {
    /// The built-in model names.
    pub fn built_in_names() -> Vec<&'static str> {
        BUILT_IN.iter().map(|r| r.0).collect()
    }

    /// A built-in model by name (case-insensitive).
    pub fn built_in(name: &str) -> Result<Model, PlanError> {
        let r = BUILT_IN
            .iter()
            .find(|r| r.0.eq_ignore_ascii_case(name))
            .ok_or_else(|| PlanError::UnknownModel { name: name.into(), known: Model::built_in_names().join(", ") })?;
        let (name, hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, tied, qkv_bias, norms, cap, window) =
            *r;
        Ok(Model {
            name: name.into(),
            hidden,
            layers,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            tied_embeddings: tied,
            qkv_bias,
            norms_per_layer: norms,
            final_softcap: cap,
            sliding_window: window,
        })
    }

    /// A built-in model by name, or a model from the path of a `config.json` (ending in .json).
    pub fn load(name_or_config: &str) -> Result<Model, PlanError> {
        if name_or_config.ends_with(".json") {
            Model::from_config_json(Path::new(name_or_config))
        } else {
            Model::built_in(name_or_config)
        }
    }

    /// A model from a Hugging Face `config.json` (Llama, Qwen 2, Gemma 2 and look-alikes).
    pub fn from_config_json(path: &Path) -> Result<Model, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|e| PlanError::Config(format!("{}: {e}", path.display())))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| PlanError::Config(format!("{}: {e}", path.display())))?;
        let int = |k: &str| v.get(k).and_then(|x| x.as_u64());
        let need = |k: &str| int(k).ok_or_else(|| PlanError::Config(format!("{}: no integer \"{k}\"", path.display())));
        let model_type = v.get("model_type").and_then(|x| x.as_str()).unwrap_or("llama");
        let hidden = need("hidden_size")?;
        let heads = need("num_attention_heads")?;
        Ok(Model {
            name: v.get("_name_or_path").and_then(|x| x.as_str()).unwrap_or(model_type).to_string(),
            hidden,
            layers: need("num_hidden_layers")?,
            heads,
            kv_heads: int("num_key_value_heads").unwrap_or(heads),
            head_dim: int("head_dim").unwrap_or(hidden / heads.max(1)),
            intermediate: need("intermediate_size")?,
            vocab: need("vocab_size")?,
            tied_embeddings: v.get("tie_word_embeddings").and_then(|x| x.as_bool()).unwrap_or(false),
            qkv_bias: model_type.starts_with("qwen2")
                || v.get("attention_bias").and_then(|x| x.as_bool()) == Some(true),
            norms_per_layer: if model_type.starts_with("gemma2") || model_type.starts_with("gemma3") { 4 } else { 2 },
            final_softcap: v.get("final_logit_softcapping").and_then(|x| x.as_f64()),
            // Gemma 2 / 3 always interleave sliding-window layers; Qwen 2 only when it says so
            sliding_window: int("sliding_window").filter(|_| {
                model_type.starts_with("gemma2")
                    || model_type.starts_with("gemma3")
                    || v.get("use_sliding_window").and_then(|x| x.as_bool()) == Some(true)
            }),
        })
    }

    pub fn q_dim(&self) -> u64 {
        self.heads * self.head_dim
    }
    pub fn kv_dim(&self) -> u64 {
        self.kv_heads * self.head_dim
    }

    /// Parameters of one decoder layer.
    pub fn layer_params(&self) -> u64 {
        let (h, q, kv) = (self.hidden, self.q_dim(), self.kv_dim());
        let attention = h * q + 2 * h * kv + q * h + if self.qkv_bias { q + 2 * kv } else { 0 };
        let mlp = 3 * h * self.intermediate;
        attention + mlp + self.norms_per_layer * h
    }

    /// All parameters: embeddings, layers, final norm, and the LM head unless tied.
    pub fn params(&self) -> u64 {
        let embed = self.vocab * self.hidden;
        embed + self.layers * self.layer_params() + self.hidden + if self.tied_embeddings { 0 } else { embed }
    }

    /// Parameters of LoRA rank `r` on the attention projections (q, k, v, o) of every layer.
    pub fn lora_params(&self, r: u64) -> u64 {
        let (h, q, kv) = (self.hidden, self.q_dim(), self.kv_dim());
        self.layers * r * ((h + q) + 2 * (h + kv) + (q + h))
    }
}
