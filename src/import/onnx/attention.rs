//! Attention (opsets 23-25), lowered to what TFLite has: BATCH_MATMUL, MUL, ADD, TANH, SOFTMAX,
//! SELECT_V2, RESHAPE, TRANSPOSE and CONCATENATION.
//!
//! The lowering follows the operator's definition step by step (ONNX's reference
//! implementation): Q and K each scaled by `sqrt(scale)`, `Q·Kᵀ`, the optional soft cap
//! `softcap·tanh(x/softcap)`, the additive bias (attention mask, causal and sliding-window
//! masks, padding of an external cache), softmax over the keys, fully-masked query rows set to
//! zero, then `·V`. Grouped-query attention needs no copies of K and V: the query heads of one
//! group are stacked along the query axis (`[b, kv_heads, group·q_len, d]`, a reshape, since
//! the heads of a group are adjacent) and multiply their shared K and V head.
//!
//! The masks known at conversion time (causal, sliding window, `nonpad_kv_seqlen` when it is
//! constant) form one constant bias; a run-time `attn_mask` is added to it.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{BinaryOp, CompareOp, ConstData, DType, Op, ReduceOp, TensorId, UnaryOp};
use tract_onnx::pb::NodeProto;

/// The shapes and attributes of one Attention node.
struct Dims {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    q_len: usize,
    kv_len: usize,
    /// Keys from `past_key` that precede this block's (0 without a cache).
    past_len: usize,
}

/// The mask positions known at conversion time.
struct StaticMask {
    is_causal: bool,
    /// -1: unbounded.
    left_window: i64,
    right_window: i64,
    /// `nonpad_kv_seqlen`, one per batch, when given.
    nonpad: Option<Vec<i64>>,
}

impl StaticMask {
    fn windowed(&self) -> bool {
        self.left_window >= 0 || self.right_window >= 0
    }

    /// The additive bias (0 where a key may be attended, -inf where not), `[q_len, kv_len]`, or
    /// `[batch, 1, q_len, kv_len]` with a per-batch cache length; None when nothing is masked.
    fn bias(&self, d: &Dims) -> Option<ConstData> {
        if !self.is_causal && !self.windowed() && self.nonpad.is_none() {
            return None;
        }
        // The causal frontier and window are offset by the keys preceding the query block:
        // the past cache's length, or (external cache) nonpad_kv_seqlen[b] - q_len.
        let offsets: Vec<i64> = match &self.nonpad {
            Some(lens) => lens.iter().map(|&l| l - d.q_len as i64).collect(),
            None => vec![d.past_len as i64],
        };
        let mut v = Vec::with_capacity(offsets.len() * d.q_len * d.kv_len);
        for (b, &offset) in offsets.iter().enumerate() {
            for i in 0..d.q_len as i64 {
                for j in 0..d.kv_len as i64 {
                    let diff = i + offset - j;
                    let mut allowed = !self.is_causal || diff >= 0;
                    if self.left_window >= 0 {
                        allowed &= diff <= self.left_window;
                    }
                    if self.right_window >= 0 {
                        allowed &= -diff <= self.right_window;
                    }
                    if let Some(lens) = &self.nonpad {
                        allowed &= j < lens[b];
                    }
                    v.push(if allowed { 0.0 } else { f32::NEG_INFINITY });
                }
            }
        }
        Some(if self.nonpad.is_some() {
            ConstData::from_f32(&[offsets.len(), 1, d.q_len, d.kv_len], v)
        } else {
            ConstData::from_f32(&[d.q_len, d.kv_len], v)
        })
    }
}

impl Importer<'_> {
    pub(super) fn attention(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let q_in = self.req(n, 0, "Q")?;
        let k_in = self.req(n, 1, "K")?;
        let v_in = self.req(n, 2, "V")?;
        for (id, what) in [(q_in, "Q"), (k_in, "K"), (v_in, "V")] {
            if self.dtype(id) != DType::F32 {
                return unsup(format!(
                    "{what} is {}; only float32 Attention is supported",
                    self.dtype(id).name()
                ));
            }
        }
        let out_name = |i: usize| n.output.get(i).map(String::as_str).unwrap_or("");
        let mode = a.int_or("qk_matmul_output_mode", 0)?;
        let softcap = a.float_or("softcap", 0.0)?;
        let wants_qk = !out_name(3).is_empty();
        if wants_qk && !(0..=3).contains(&mode) {
            return bad(format!("qk_matmul_output_mode {mode} is not 0, 1, 2 or 3"));
        }
        if wants_qk && mode == 0 && softcap > 0.0 {
            // The operator's text gives the raw product here, ONNX's reference the soft-capped
            // one: no single faithful answer.
            return unsup(
                "qk_matmul_output_mode 0 with softcap: the raw product and the soft-capped one \
                 are both read as the definition",
            );
        }
        if let Some(p) = a.int("softmax_precision")? {
            // 1 is FLOAT: the softmax in float32, as here. A wider or narrower softmax would
            // round differently.
            if p != 1 {
                return unsup(format!(
                    "softmax_precision {p} is not supported (only 1, float32)"
                ));
            }
        }

        let (q, k, v) = self.attention_heads(a, q_in, k_in, v_in)?;
        let (k, v, past_len) = self.attention_cache(n, k, v)?;
        let (qs, ks, vs) = (self.shape(q), self.shape(k), self.shape(v));
        let d = Dims {
            batch: qs[0],
            q_heads: qs[1],
            kv_heads: ks[1],
            q_len: qs[2],
            kv_len: ks[2],
            past_len,
        };
        if ks[0] != d.batch || vs[0] != d.batch || vs[1] != d.kv_heads || vs[2] != d.kv_len {
            return bad(format!("Q {qs:?}, K {ks:?} and V {vs:?} do not match"));
        }
        if ks[3] != qs[3] {
            return bad(format!("Q {qs:?} and K {ks:?} have different head sizes"));
        }
        if d.kv_heads == 0 || !d.q_heads.is_multiple_of(d.kv_heads) {
            return unsup(format!(
                "{} query heads do not form groups over {} key/value heads",
                d.q_heads, d.kv_heads
            ));
        }
        let head_size = qs[3];
        let v_head_size = vs[3];

        // Q·Kᵀ, each scaled by sqrt(scale).
        let scale = match a.float("scale")? {
            Some(s) => f64::from(s),
            None => 1.0 / (head_size as f64).sqrt(),
        };
        let root = self.scalar(scale.sqrt() as f32, DType::F32, "scale_sqrt");
        let q = self.emit_tmp(bin(BinaryOp::Mul), &[q, root], "q_scaled")?;
        let k = self.emit_tmp(bin(BinaryOp::Mul), &[k, root], "k_scaled")?;
        let group = d.q_heads / d.kv_heads;
        let grouped = |len: usize, last: usize| vec![d.batch, d.kv_heads, group * len, last];
        let per_head = |len: usize, last: usize| vec![d.batch, d.q_heads, len, last];
        let q = if group > 1 {
            let shape = grouped(d.q_len, head_size);
            self.emit_tmp(Op::Reshape { shape }, &[q], "q_grouped")?
        } else {
            q
        };
        let matmul = Op::MatMul {
            transpose_a: false,
            transpose_b: true,
        };
        let mut logits = self.emit_tmp(matmul, &[q, k], "qk")?;
        if group > 1 {
            let shape = per_head(d.q_len, d.kv_len);
            logits = self.emit_tmp(Op::Reshape { shape }, &[logits], "qk_heads")?;
        }
        let raw = logits;
        if softcap > 0.0 {
            let cap = self.scalar(softcap, DType::F32, "softcap");
            let x = self.emit_tmp(bin(BinaryOp::Div), &[logits, cap], "softcap_div")?;
            let x = self.emit_tmp(Op::Unary(UnaryOp::Tanh), &[x], "softcap_tanh")?;
            logits = self.emit_tmp(bin(BinaryOp::Mul), &[x, cap], "softcapped")?;
        }
        let capped = logits;

        let bias = self.attention_bias(n, a, &d)?;
        if let Some(b) = bias {
            logits = self.emit_tmp(bin(BinaryOp::Add), &[logits, b], "biased")?;
        }
        let biased = logits;
        let mut probs = self.emit_tmp(Op::Softmax { axis: 3 }, &[logits], "softmax")?;
        if let Some(b) = bias {
            probs = self.zero_masked_rows(b, probs)?;
        }

        if wants_qk {
            let qk = match mode {
                0 => raw,
                1 => capped,
                2 => biased,
                _ => probs,
            };
            self.bind(out_name(3), qk);
        }
        let probs = if group > 1 {
            let shape = grouped(d.q_len, d.kv_len);
            self.emit_tmp(Op::Reshape { shape }, &[probs], "probs_grouped")?
        } else {
            probs
        };
        let matmul = Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        };
        let rank3 = self.shape(q_in).len() == 3;
        let y = out_name(0);
        if group == 1 && !rank3 {
            self.emit_to(matmul, &[probs, v], y)?;
            return Ok(());
        }
        let mut out = self.emit_tmp(matmul, &[probs, v], "pv")?;
        if group > 1 {
            let shape = per_head(d.q_len, v_head_size);
            out = if rank3 {
                self.emit_tmp(Op::Reshape { shape }, &[out], "pv_heads")?
            } else {
                self.emit_to(Op::Reshape { shape }, &[out], y)?
            };
        }
        if rank3 {
            let perm = vec![0, 2, 1, 3];
            let t = self.emit_tmp(Op::Transpose { perm }, &[out], "y_seq")?;
            let shape = vec![d.batch, d.q_len, d.q_heads * v_head_size];
            self.emit_to(Op::Reshape { shape }, &[t], y)?;
        }
        Ok(())
    }

    /// Q, K and V as `[batch, heads, seq, head_size]`: 3-D inputs `[batch, seq, heads·size]`
    /// are split into `q_num_heads` / `kv_num_heads` heads.
    fn attention_heads(
        &mut self,
        a: &Attrs,
        q: TensorId,
        k: TensorId,
        v: TensorId,
    ) -> R<(TensorId, TensorId, TensorId)> {
        let (qs, ks, vs) = (self.shape(q), self.shape(k), self.shape(v));
        if qs.len() != ks.len() || qs.len() != vs.len() || !(3..=4).contains(&qs.len()) {
            return bad(format!(
                "Q {qs:?}, K {ks:?} and V {vs:?} must all be 3-D or all 4-D"
            ));
        }
        if qs.len() == 4 {
            return Ok((q, k, v));
        }
        let heads = |name: &str| -> R<usize> {
            match a.int(name)? {
                Some(h) if h > 0 => Ok(h as usize),
                Some(h) => bad(format!("{name} {h} must be positive")),
                None => bad(format!("{name} is required with 3-D inputs")),
            }
        };
        let q_heads = heads("q_num_heads")?;
        let kv_heads = heads("kv_num_heads")?;
        let split = |s: &mut Self, x: TensorId, heads: usize, what: &str| -> R<TensorId> {
            let shape = s.shape(x);
            if !shape[2].is_multiple_of(heads) {
                return bad(format!(
                    "{what} {shape:?}: hidden size not a multiple of {heads} heads"
                ));
            }
            let split = vec![shape[0], shape[1], heads, shape[2] / heads];
            let x = s.emit_tmp(Op::Reshape { shape: split }, &[x], &format!("{what}_split"))?;
            let perm = vec![0, 2, 1, 3];
            s.emit_tmp(Op::Transpose { perm }, &[x], &format!("{what}_heads"))
        };
        let q = split(self, q, q_heads, "q")?;
        let k = split(self, k, kv_heads, "k")?;
        let v = split(self, v, kv_heads, "v")?;
        Ok((q, k, v))
    }

    /// K and V after the past cache (inputs 4 and 5) is prepended, bound to the outputs
    /// `present_key` / `present_value`; and the past length.
    fn attention_cache(
        &mut self,
        n: &NodeProto,
        k: TensorId,
        v: TensorId,
    ) -> R<(TensorId, TensorId, usize)> {
        let past_k = self.inp(n, 4)?;
        let past_v = self.inp(n, 5)?;
        let out_name = |i: usize| n.output.get(i).map(String::as_str).unwrap_or("");
        let (k, v, past_len) = match (past_k, past_v) {
            (None, None) => (k, v, 0),
            (Some(pk), Some(pv)) => {
                let (ps, ks) = (self.shape(pk), self.shape(k));
                let (pvs, vs) = (self.shape(pv), self.shape(v));
                let fits = |p: &[usize], x: &[usize]| {
                    p.len() == 4 && p[0] == x[0] && p[1] == x[1] && p[3] == x[3]
                };
                if !fits(&ps, &ks) || !fits(&pvs, &vs) || ps[2] != pvs[2] {
                    return bad(format!(
                        "past_key {ps:?} / past_value {pvs:?} do not match K {ks:?} / V {vs:?}"
                    ));
                }
                if self.dtype(pk) != DType::F32 || self.dtype(pv) != DType::F32 {
                    return bad("past_key and past_value must be float32 like K and V");
                }
                let cat = Op::Concat { axis: 2 };
                let k = self.emit_tmp(cat.clone(), &[pk, k], "present_key")?;
                let v = self.emit_tmp(cat, &[pv, v], "present_value")?;
                (k, v, ps[2])
            }
            _ => return bad("past_key and past_value must be given together"),
        };
        self.bind(out_name(1), k);
        self.bind(out_name(2), v);
        Ok((k, v, past_len))
    }

    /// The additive bias over `[.., q_len, kv_len]`: `attn_mask` (input 3; a bool mask is
    /// 0 where true, -inf where false; one shorter than the keys is padded with -inf) plus the
    /// masks known at conversion time. None when nothing is masked.
    fn attention_bias(&mut self, n: &NodeProto, a: &Attrs, d: &Dims) -> R<Option<TensorId>> {
        let nonpad = match self.inp(n, 6)? {
            None => None,
            Some(id) => {
                if self.inp(n, 4)?.is_some() {
                    return bad("nonpad_kv_seqlen cannot be combined with past_key/past_value");
                }
                let Some(lens) = self.cst(id).map(|c| c.to_i64_vec()) else {
                    return unsup(
                        "nonpad_kv_seqlen (input 6) must be constant (the masks it sets are \
                         built at conversion time)",
                    );
                };
                if lens.len() != d.batch {
                    return bad(format!(
                        "nonpad_kv_seqlen has {} values for a batch of {}",
                        lens.len(),
                        d.batch
                    ));
                }
                Some(lens)
            }
        };
        let window = |name: &str| -> R<i64> {
            match a.int_or(name, -1)? {
                w if w >= -1 => Ok(w),
                w => bad(format!("{name} {w} must be -1 or non-negative")),
            }
        };
        let fixed = StaticMask {
            is_causal: a.int_or("is_causal", 0)? != 0,
            left_window: window("left_window_size")?,
            right_window: window("right_window_size")?,
            nonpad,
        };
        let fixed = fixed
            .bias(d)
            .map(|c| self.add_const(&format!("{}/mask_bias", self.cur), c));
        let Some(mask) = self.inp(n, 3)? else {
            return Ok(fixed);
        };
        let ms = self.shape(mask);
        let Some(&mask_len) = ms.last() else {
            return bad("attn_mask must have at least one dimension");
        };
        if mask_len > d.kv_len {
            return bad(format!(
                "attn_mask {ms:?} is longer than the {} keys",
                d.kv_len
            ));
        }
        let mut mask = match self.dtype(mask) {
            DType::Bool => {
                let zero = self.scalar(0.0, DType::F32, "zero");
                let neg_inf = self.scalar(f32::NEG_INFINITY, DType::F32, "neg_inf");
                self.emit_tmp(Op::Where, &[mask, zero, neg_inf], "mask_bias")?
            }
            DType::F32 => mask,
            other => {
                return bad(format!(
                    "attn_mask is {}; it must be bool or float32 like Q",
                    other.name()
                ))
            }
        };
        if mask_len < d.kv_len {
            let mut pad_shape = ms.clone();
            *pad_shape.last_mut().expect("checked non-empty") = d.kv_len - mask_len;
            let count = pad_shape.iter().product();
            let pad = ConstData::from_f32(&pad_shape, vec![f32::NEG_INFINITY; count]);
            let pad = self.add_const(&format!("{}/mask_pad", self.cur), pad);
            let axis = ms.len() - 1;
            mask = self.emit_tmp(Op::Concat { axis }, &[mask, pad], "mask_padded")?;
        }
        Ok(Some(match fixed {
            Some(f) => self.emit_tmp(bin(BinaryOp::Add), &[mask, f], "bias")?,
            None => mask,
        }))
    }

    /// `probs` with zeros in the query rows whose bias is -inf for every key (a row with no
    /// key to attend: its softmax would be 0/0).
    fn zero_masked_rows(&mut self, bias: TensorId, probs: TensorId) -> R<TensorId> {
        let bs = self.shape(bias);
        let last = bs.len() - 1;
        let neg_inf = self.scalar(f32::NEG_INFINITY, DType::F32, "neg_inf");
        let allowed = Op::Compare {
            op: CompareOp::NotEqual,
        };
        let allowed = self.emit_tmp(allowed, &[bias, neg_inf], "allowed")?;
        // A count of allowed keys as 0/1 floats: TFLite's REDUCE_MAX starts from the lowest
        // finite float, so it cannot tell a row of -inf by its maximum.
        let one = self.scalar(1.0, DType::F32, "one");
        let zero = self.scalar(0.0, DType::F32, "zero");
        let allowed = self.emit_tmp(Op::Where, &[allowed, one, zero], "allowed_f")?;
        let reduce = Op::Reduce {
            op: ReduceOp::Max,
            axes: vec![last],
            keep_dims: true,
        };
        let any = self.emit_tmp(reduce, &[allowed], "row_allowed")?;
        let none = Op::Compare {
            op: CompareOp::Equal,
        };
        let none = self.emit_tmp(none, &[any, zero], "row_masked")?;
        if let Some(c) = self.cst(none) {
            if c.to_f32_vec().iter().all(|&x| x == 0.0) {
                return Ok(probs);
            }
        }
        self.emit_tmp(Op::Where, &[none, zero, probs], "probs_guarded")
    }
}
