//! ONNX LSTM and GRU, unrolled over their fixed sequence length into ops every TFLite runtime
//! has, float and int8: one FULLY_CONNECTED projects the inputs of all timesteps at once, then
//! each step is a recurrent FULLY_CONNECTED, SPLIT into gates, LOGISTIC / TANH, MUL, ADD / SUB;
//! CONCATENATION + RESHAPE assemble Y, Y_h and Y_c in ONNX's shapes.
//!
//! Supported: forward, reverse and bidirectional; `layout` 0 and 1; initial states given (as
//! constants or run-time inputs) or absent (zero); the default activations; GRU's
//! `linear_before_reset` 0 and 1. Not supported (an error naming the node): `sequence_lens`
//! shorter than the sequence, `clip`, other activations, LSTM peepholes and `input_forget`.
//!
//! Gate order (ONNX): LSTM i, o, f, c; GRU z, r, h. A step without a previous state (the first
//! one, when the initial state is absent or zero) skips the recurrent product.

use super::{bad, unsup, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{Activation, BinaryOp, ConstData, DType, Op, TensorId, UnaryOp};
use tract_onnx::pb::NodeProto;

/// Inputs of one CONCATENATION when assembling Y.
const MAX_CONCAT: usize = 512;

/// Shapes and attributes shared by LSTM and GRU.
pub(super) struct Spec {
    pub(super) seq: usize,
    pub(super) batch: usize,
    pub(super) input: usize,
    pub(super) hidden: usize,
    /// One entry per direction: true when it runs backwards in time.
    pub(super) reverse: Vec<bool>,
    /// ONNX `layout` 1: batch-first X, Y, and states.
    pub(super) batch_first: bool,
}

/// Per-direction weights: W [G*H, I], R [G*H, H], Wb and Rb [G*H] (zero when B is absent).
pub(super) struct Weights {
    pub(super) w: Vec<f32>,
    pub(super) r: Vec<f32>,
    pub(super) wb: Vec<f32>,
    pub(super) rb: Vec<f32>,
}

fn const_f32(imp: &Importer<'_>, id: TensorId, what: &str) -> R<Vec<f32>> {
    match imp.cst(id) {
        Some(d) if matches!(d.dtype(), DType::F32 | DType::F16) => Ok(d.to_f32_vec()),
        Some(_) => bad(format!("{what} must be float")),
        None => unsup(format!("{what} must be constant")),
    }
}

/// Reads X, W, R, B, sequence_lens and the attributes; `gates` is 4 (LSTM) or 3 (GRU).
pub(super) fn spec(
    imp: &mut Importer<'_>,
    n: &NodeProto,
    a: &Attrs,
    gates: usize,
    default_acts: &[&str],
) -> R<(Spec, TensorId, Vec<Weights>)> {
    let x = imp.req(n, 0, "X")?;
    let w = imp.req(n, 1, "W")?;
    let r = imp.req(n, 2, "R")?;
    let b = imp.inp(n, 3)?;
    if imp.dtype(x) != DType::F32 {
        return unsup(format!("{} input X is not supported", imp.dtype(x).name()));
    }
    let dirs = match a.string_or("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return bad(format!("direction '{other}' is not valid")),
    };
    let nd = dirs.len();
    let batch_first = match a.int_or("layout", 0)? {
        0 => false,
        1 => true,
        l => return bad(format!("layout {l} is not valid")),
    };
    if a.has("clip") {
        return unsup("the clip attribute is not supported");
    }
    if let Some(acts) = a.strings("activations")? {
        let want: Vec<&str> = default_acts
            .iter()
            .cycle()
            .take(default_acts.len() * nd)
            .copied()
            .collect();
        if acts.len() != want.len()
            || acts
                .iter()
                .zip(&want)
                .any(|(g, w)| !g.eq_ignore_ascii_case(w))
        {
            return unsup(format!(
                "activations {acts:?} are not supported (only the defaults {default_acts:?})"
            ));
        }
    }
    if a.has("activation_alpha") || a.has("activation_beta") {
        return unsup("activation_alpha/activation_beta are not supported");
    }
    let xs = imp.shape(x);
    if xs.len() != 3 {
        return bad(format!("X must be 3-D, has shape {xs:?}"));
    }
    let (seq, batch, input) = if batch_first {
        (xs[1], xs[0], xs[2])
    } else {
        (xs[0], xs[1], xs[2])
    };
    if seq == 0 || batch == 0 || input == 0 {
        return bad(format!("X has an empty dimension: {xs:?}"));
    }
    let ws = imp.shape(w);
    if ws.len() != 3 || ws[0] != nd || ws[2] != input || !ws[1].is_multiple_of(gates) || ws[1] == 0
    {
        return bad(format!(
            "W has shape {ws:?}, expected [{nd}, {gates}*hidden, {input}]"
        ));
    }
    let hidden = ws[1] / gates;
    if let Some(h) = a.int("hidden_size")? {
        if h != hidden as i64 {
            return bad(format!("hidden_size {h} does not match W {ws:?}"));
        }
    }
    let rs = imp.shape(r);
    if rs != [nd, gates * hidden, hidden] {
        return bad(format!(
            "R has shape {rs:?}, expected [{nd}, {}, {hidden}]",
            gates * hidden
        ));
    }
    if let Some(b) = b {
        let bs = imp.shape(b);
        if bs != [nd, 2 * gates * hidden] {
            return bad(format!(
                "B has shape {bs:?}, expected [{nd}, {}]",
                2 * gates * hidden
            ));
        }
    }
    if let Some(sl) = imp.inp(n, 4)? {
        match imp.cst(sl) {
            Some(d) if d.to_i64_vec().iter().all(|&l| l == seq as i64) => {}
            Some(d) => {
                return unsup(format!(
                    "sequence_lens {:?} shorter than the sequence length {seq} are not \
                     supported",
                    d.to_i64_vec()
                ))
            }
            None => return unsup("sequence_lens computed at run time is not supported"),
        }
    }
    let wv = const_f32(imp, w, "W")?;
    let rv = const_f32(imp, r, "R")?;
    let bv = match b {
        Some(b) => const_f32(imp, b, "B")?,
        None => vec![0.0; nd * 2 * gates * hidden],
    };
    let gh = gates * hidden;
    let weights = (0..nd)
        .map(|d| Weights {
            w: wv[d * gh * input..(d + 1) * gh * input].to_vec(),
            r: rv[d * gh * hidden..(d + 1) * gh * hidden].to_vec(),
            wb: bv[d * 2 * gh..d * 2 * gh + gh].to_vec(),
            rb: bv[d * 2 * gh + gh..(d + 1) * 2 * gh].to_vec(),
        })
        .collect();
    Ok((
        Spec {
            seq,
            batch,
            input,
            hidden,
            reverse: dirs,
            batch_first,
        },
        x,
        weights,
    ))
}

/// Emits the IR ops of the unrolled cell, named after the ONNX node.
struct Unroll<'i, 'm> {
    imp: &'i mut Importer<'m>,
}

impl Unroll<'_, '_> {
    fn op(&mut self, op: Op, inputs: &[TensorId], suffix: &str) -> R<TensorId> {
        self.imp.emit_tmp(op, inputs, suffix)
    }

    fn bin(&mut self, op: BinaryOp, a: TensorId, b: TensorId, suffix: &str) -> R<TensorId> {
        let op = Op::Binary {
            op,
            activation: Activation::None,
        };
        self.op(op, &[a, b], suffix)
    }

    fn unary(&mut self, u: UnaryOp, x: TensorId, suffix: &str) -> R<TensorId> {
        self.op(Op::Unary(u), &[x], suffix)
    }

    fn constant(&mut self, suffix: &str, shape: &[usize], v: Vec<f32>) -> TensorId {
        let base = format!("{}/{suffix}", self.imp.cur);
        self.imp.add_const(&base, ConstData::from_f32(shape, v))
    }

    /// x [rows, K] · Wᵀ (+ b) with constant W [N, K].
    fn dense(
        &mut self,
        x: TensorId,
        w: Vec<f32>,
        n: usize,
        bias: Option<Vec<f32>>,
        suffix: &str,
    ) -> R<TensorId> {
        let k = w.len() / n.max(1);
        if let Some(xd) = self.imp.cst(x) {
            // A constant state (initial_h): the product is a constant too.
            let xv = xd.to_f32_vec();
            let rows = xv.len() / k.max(1);
            let mut out = vec![0f32; rows * n];
            for r in 0..rows {
                for j in 0..n {
                    let dot: f32 = (0..k).map(|i| xv[r * k + i] * w[j * k + i]).sum();
                    out[r * n + j] = dot + bias.as_ref().map_or(0.0, |b| b[j]);
                }
            }
            return Ok(self.constant(suffix, &[rows, n], out));
        }
        let wt = self.constant(&format!("{suffix}_weight"), &[n, k], w);
        let mut ins = vec![x, wt];
        if let Some(b) = bias {
            ins.push(self.constant(&format!("{suffix}_bias"), &[n], b));
        }
        self.op(
            Op::FullyConnected {
                activation: Activation::None,
            },
            &ins,
            suffix,
        )
    }

    fn split(
        &mut self,
        x: TensorId,
        axis: usize,
        sizes: Vec<usize>,
        suffix: &str,
    ) -> R<Vec<TensorId>> {
        if sizes.len() == 1 {
            return Ok(vec![x]);
        }
        let names = (0..sizes.len())
            .map(|i| self.imp.tmp(&format!("{suffix}{i}")))
            .collect();
        self.imp.emit(Op::Split { axis, sizes }, &[x], names)
    }

    fn reshape(&mut self, x: TensorId, shape: Vec<usize>, suffix: &str) -> R<TensorId> {
        if self.imp.shape(x) == shape {
            return Ok(x);
        }
        self.op(Op::Reshape { shape }, &[x], suffix)
    }

    /// Concatenates [rows, H] pieces along axis 0, reshapes to `shape` and transposes by
    /// `perm` (batch-first layout), binding the result to the ONNX value `out`.
    fn assemble(
        &mut self,
        pieces: &[TensorId],
        shape: Vec<usize>,
        perm: Option<Vec<usize>>,
        out: &str,
    ) -> R<()> {
        // At most MAX_CONCAT inputs per CONCATENATION (literun caps variadic operators at
        // 1024): long sequences concatenate in groups first.
        let mut level: Vec<TensorId> = pieces.to_vec();
        let mut round = 0;
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(MAX_CONCAT));
            for (i, group) in level.chunks(MAX_CONCAT).enumerate() {
                next.push(if group.len() == 1 {
                    group[0]
                } else {
                    let suffix = format!("{out}_concat{round}_{i}");
                    self.op(Op::Concat { axis: 0 }, group, &suffix)?
                });
            }
            level = next;
            round += 1;
        }
        let Some(&cat) = level.first() else {
            return bad("no timesteps to assemble");
        };
        match perm {
            None => {
                self.imp.emit_to(Op::Reshape { shape }, &[cat], out)?;
            }
            Some(perm) => {
                let r = self.reshape(cat, shape, &format!("{out}_reshape"))?;
                self.imp.emit_to(Op::Transpose { perm }, &[r], out)?;
            }
        }
        Ok(())
    }

    /// The inputs of every timestep projected by W (+ bias): one [batch, G*H] tensor per step.
    fn project_inputs(
        &mut self,
        x: TensorId,
        s: &Spec,
        w: Vec<f32>,
        gh: usize,
        bias: Vec<f32>,
        d: usize,
    ) -> R<Vec<TensorId>> {
        let x2 = self.reshape(x, vec![s.seq * s.batch, s.input], "x_rows")?;
        let xp = self.dense(x2, w, gh, Some(bias), &format!("d{d}_x_proj"))?;
        self.split(xp, 0, vec![s.batch; s.seq], &format!("d{d}_x_t"))
    }

    /// Initial state input `idx` (initial_h / initial_c) per direction, `None` when absent or
    /// all zero.
    fn initial_state(
        &mut self,
        n: &NodeProto,
        idx: usize,
        s: &Spec,
        what: &str,
    ) -> R<Vec<Option<TensorId>>> {
        let nd = s.reverse.len();
        let Some(t) = self.imp.inp(n, idx)? else {
            return Ok(vec![None; nd]);
        };
        let want = if s.batch_first {
            [s.batch, nd, s.hidden]
        } else {
            [nd, s.batch, s.hidden]
        };
        if self.imp.shape(t) != want {
            return bad(format!(
                "{what} has shape {:?}, expected {want:?}",
                self.imp.shape(t)
            ));
        }
        if self.imp.dtype(t) != DType::F32 {
            return bad(format!("{what} must be float32"));
        }
        if let Some(d) = self.imp.cst(t) {
            let v = d.to_f32_vec();
            if v.iter().all(|&x| x == 0.0) {
                return Ok(vec![None; nd]);
            }
        }
        // [D, batch, H] order, then one [batch, H] per direction.
        let t = if s.batch_first {
            self.op(
                Op::Transpose {
                    perm: vec![1, 0, 2],
                },
                &[t],
                &format!("{what}_dbh"),
            )?
        } else {
            t
        };
        let parts = self.split(t, 0, vec![1; nd], &format!("{what}_d"))?;
        parts
            .into_iter()
            .enumerate()
            .map(|(d, p)| {
                Ok(Some(self.reshape(
                    p,
                    vec![s.batch, s.hidden],
                    &format!("{what}_d{d}"),
                )?))
            })
            .collect()
    }

    fn input_in_time_major(&mut self, x: TensorId, s: &Spec) -> R<TensorId> {
        if s.batch_first {
            self.op(
                Op::Transpose {
                    perm: vec![1, 0, 2],
                },
                &[x],
                "x_time_major",
            )
        } else {
            Ok(x)
        }
    }
}

/// Binds Y / Y_h / Y_c from the per-(time, direction) hidden states.
fn outputs(
    u: &mut Unroll<'_, '_>,
    n: &NodeProto,
    s: &Spec,
    hs: &[Vec<TensorId>],
    cs: Option<&[Vec<TensorId>]>,
) -> R<()> {
    let nd = s.reverse.len();
    let out = |i: usize| n.output.get(i).filter(|o| !o.is_empty()).cloned();
    if let Some(y) = out(0).filter(|y| u.imp.used(y)) {
        // (t, d) order: [seq * D * batch, H] is [seq, D, batch, H] in memory.
        let pieces: Vec<TensorId> = (0..s.seq)
            .flat_map(|t| (0..nd).map(move |d| (t, d)))
            .map(|(t, d)| hs[d][t])
            .collect();
        let perm = s.batch_first.then(|| vec![2, 0, 1, 3]);
        u.assemble(&pieces, vec![s.seq, nd, s.batch, s.hidden], perm, &y)?;
    }
    let last = |d: usize| if s.reverse[d] { 0 } else { s.seq - 1 };
    let perm = s.batch_first.then(|| vec![1, 0, 2]);
    if let Some(yh) = out(1).filter(|y| u.imp.used(y)) {
        let pieces: Vec<TensorId> = (0..nd).map(|d| hs[d][last(d)]).collect();
        u.assemble(&pieces, vec![nd, s.batch, s.hidden], perm.clone(), &yh)?;
    }
    if let (Some(yc), Some(cs)) = (out(2).filter(|y| u.imp.used(y)), cs) {
        let pieces: Vec<TensorId> = (0..nd).map(|d| cs[d][last(d)]).collect();
        u.assemble(&pieces, vec![nd, s.batch, s.hidden], perm, &yc)?;
    }
    Ok(())
}

/// The timesteps in processing order for a direction.
fn steps(seq: usize, reverse: bool) -> Vec<usize> {
    if reverse {
        (0..seq).rev().collect()
    } else {
        (0..seq).collect()
    }
}

pub(super) fn lstm(imp: &mut Importer<'_>, n: &NodeProto, a: &Attrs) -> R<()> {
    let (s, x, weights) = spec(imp, n, a, 4, &["Sigmoid", "Tanh", "Tanh"])?;
    if a.int_or("input_forget", 0)? != 0 {
        return unsup("input_forget=1 is not supported");
    }
    if let Some(p) = imp.inp(n, 7)? {
        match imp.cst(p) {
            Some(d) if d.to_f32_vec().iter().all(|&v| v == 0.0) => {}
            _ => return unsup("peephole weights (input P) are not supported"),
        }
    }
    let h = s.hidden;
    let mut u = Unroll { imp };
    let x = u.input_in_time_major(x, &s)?;
    let h0 = u.initial_state(n, 5, &s, "initial_h")?;
    let c0 = u.initial_state(n, 6, &s, "initial_c")?;
    let mut hs = Vec::new();
    let mut cs = Vec::new();
    for (d, wt) in weights.into_iter().enumerate() {
        let bias: Vec<f32> = wt.wb.iter().zip(&wt.rb).map(|(a, b)| a + b).collect();
        let xt = u.project_inputs(x, &s, wt.w, 4 * h, bias, d)?;
        let mut hd = vec![0; s.seq];
        let mut cd = vec![0; s.seq];
        let (mut hp, mut cp) = (h0[d], c0[d]);
        for t in steps(s.seq, s.reverse[d]) {
            let p = format!("d{d}_t{t}_");
            let gates = match hp {
                Some(hprev) => {
                    let rec = u.dense(hprev, wt.r.clone(), 4 * h, None, &format!("{p}rec"))?;
                    u.bin(BinaryOp::Add, xt[t], rec, &format!("{p}gates"))?
                }
                None => xt[t],
            };
            let g = u.split(gates, 1, vec![3 * h, h], &format!("{p}g"))?;
            let sg = u.unary(UnaryOp::Sigmoid, g[0], &format!("{p}iof"))?;
            let iof = u.split(sg, 1, vec![h, h, h], &format!("{p}iof"))?;
            let (i, o, f) = (iof[0], iof[1], iof[2]);
            let cand = u.unary(UnaryOp::Tanh, g[1], &format!("{p}cand"))?;
            let ic = u.bin(BinaryOp::Mul, i, cand, &format!("{p}i_cand"))?;
            let c = match cp {
                Some(cprev) => {
                    let fc = u.bin(BinaryOp::Mul, f, cprev, &format!("{p}f_c"))?;
                    u.bin(BinaryOp::Add, fc, ic, &format!("{p}c"))?
                }
                None => ic,
            };
            let tc = u.unary(UnaryOp::Tanh, c, &format!("{p}tanh_c"))?;
            let hn = u.bin(BinaryOp::Mul, o, tc, &format!("{p}h"))?;
            hd[t] = hn;
            cd[t] = c;
            hp = Some(hn);
            cp = Some(c);
        }
        hs.push(hd);
        cs.push(cd);
    }
    outputs(&mut u, n, &s, &hs, Some(&cs))
}

pub(super) fn gru(imp: &mut Importer<'_>, n: &NodeProto, a: &Attrs) -> R<()> {
    let (s, x, weights) = spec(imp, n, a, 3, &["Sigmoid", "Tanh"])?;
    let lbr = a.int_or("linear_before_reset", 0)? != 0;
    let h = s.hidden;
    let mut u = Unroll { imp };
    let x = u.input_in_time_major(x, &s)?;
    let h0 = u.initial_state(n, 5, &s, "initial_h")?;
    let mut hs = Vec::new();
    for (d, wt) in weights.into_iter().enumerate() {
        // z and r take both biases; h takes Wbh, plus Rbh unless it is applied after the
        // recurrent product (linear_before_reset).
        let mut bias: Vec<f32> = wt.wb.iter().zip(&wt.rb).map(|(a, b)| a + b).collect();
        if lbr {
            bias[2 * h..].copy_from_slice(&wt.wb[2 * h..]);
        }
        let rbh = wt.rb[2 * h..].to_vec();
        let r_zr = wt.r[..2 * h * h].to_vec();
        let r_h = wt.r[2 * h * h..].to_vec();
        let xt = u.project_inputs(x, &s, wt.w, 3 * h, bias, d)?;
        let mut hd = vec![0; s.seq];
        let mut hp = h0[d];
        for t in steps(s.seq, s.reverse[d]) {
            let p = format!("d{d}_t{t}_");
            let xg = u.split(xt[t], 1, vec![2 * h, h], &format!("{p}x"))?;
            let (zr, hh) = match (hp, lbr) {
                (Some(hprev), true) => {
                    let mut b = vec![0.0; 3 * h];
                    b[2 * h..].copy_from_slice(&rbh);
                    let rec = u.dense(hprev, wt.r.clone(), 3 * h, Some(b), &format!("{p}rec"))?;
                    let rg = u.split(rec, 1, vec![2 * h, h], &format!("{p}rec"))?;
                    let pre = u.bin(BinaryOp::Add, xg[0], rg[0], &format!("{p}zr_pre"))?;
                    let zr = u.unary(UnaryOp::Sigmoid, pre, &format!("{p}zr"))?;
                    (zr, Some(rg[1]))
                }
                (Some(hprev), false) => {
                    let rec = u.dense(hprev, r_zr.clone(), 2 * h, None, &format!("{p}rec_zr"))?;
                    let pre = u.bin(BinaryOp::Add, xg[0], rec, &format!("{p}zr_pre"))?;
                    let zr = u.unary(UnaryOp::Sigmoid, pre, &format!("{p}zr"))?;
                    (zr, None)
                }
                (None, _) => (u.unary(UnaryOp::Sigmoid, xg[0], &format!("{p}zr"))?, None),
            };
            let zr = u.split(zr, 1, vec![h, h], &format!("{p}zr"))?;
            let (z, r) = (zr[0], zr[1]);
            let hpre = match (hp, lbr) {
                // r ⊙ (H·Rhᵀ + Rbh)
                (Some(_), true) => {
                    let rh = hh.expect("set with the recurrent product");
                    let m = u.bin(BinaryOp::Mul, r, rh, &format!("{p}r_rec"))?;
                    u.bin(BinaryOp::Add, xg[1], m, &format!("{p}h_pre"))?
                }
                // (r ⊙ H)·Rhᵀ + Rbh (Rbh is already in the input bias)
                (Some(hprev), false) => {
                    let rhp = u.bin(BinaryOp::Mul, r, hprev, &format!("{p}r_h"))?;
                    let rec = u.dense(rhp, r_h.clone(), h, None, &format!("{p}rec_h"))?;
                    u.bin(BinaryOp::Add, xg[1], rec, &format!("{p}h_pre"))?
                }
                // No previous state: the recurrent product is its bias alone.
                (None, true) if rbh.iter().any(|&v| v != 0.0) => {
                    let c = u.constant(&format!("{p}rbh"), &[h], rbh.clone());
                    let m = u.bin(BinaryOp::Mul, r, c, &format!("{p}r_rec"))?;
                    u.bin(BinaryOp::Add, xg[1], m, &format!("{p}h_pre"))?
                }
                (None, _) => xg[1],
            };
            let cand = u.unary(UnaryOp::Tanh, hpre, &format!("{p}cand"))?;
            // H = cand + z ⊙ (H_prev - cand)
            let hn = match hp {
                Some(hprev) => {
                    let diff = u.bin(BinaryOp::Sub, hprev, cand, &format!("{p}diff"))?;
                    let zd = u.bin(BinaryOp::Mul, z, diff, &format!("{p}z_diff"))?;
                    u.bin(BinaryOp::Add, cand, zd, &format!("{p}h"))?
                }
                None => {
                    let zc = u.bin(BinaryOp::Mul, z, cand, &format!("{p}z_cand"))?;
                    u.bin(BinaryOp::Sub, cand, zc, &format!("{p}h"))?
                }
            };
            hd[t] = hn;
            hp = Some(hn);
        }
        hs.push(hd);
    }
    outputs(&mut u, n, &s, &hs, None)
}
