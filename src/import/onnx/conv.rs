//! Conv, ConvTranspose, MaxPool, AveragePool, LpPool, GlobalAveragePool and GlobalMaxPool.

use super::{bad, bin, unsup, Importer, R};
use crate::import::proto::{dim_values, size_value, size_values, Attrs};
use crate::ir::{
    Activation, BinaryOp, DType, Layout, Op, PadMode, PoolKind, ReduceOp, TensorId, UnaryOp,
};
use tract_onnx::pb::{attribute_proto::AttributeType, AttributeProto, NodeProto};

impl Importer<'_> {
    /// Explicit (begin, end) pads per spatial axis from auto_pad / pads.
    fn spatial_pads(
        &self,
        a: &Attrs,
        input: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
    ) -> R<Vec<(usize, usize)>> {
        let nsp = input.len();
        let auto = a.string_or("auto_pad", "NOTSET")?;
        match auto.as_str() {
            "NOTSET" => {
                let p = a.ints("pads")?.unwrap_or_else(|| vec![0; 2 * nsp]);
                if p.len() != 2 * nsp {
                    return bad(format!("pads {p:?} must have {} values", 2 * nsp));
                }
                if p.iter().any(|&v| v < 0) {
                    return unsup(format!("negative pads {p:?} are not supported"));
                }
                let p = size_values(&p, "pad")?;
                Ok((0..nsp).map(|i| (p[i], p[i + nsp])).collect())
            }
            "VALID" => Ok(vec![(0, 0); nsp]),
            "SAME_UPPER" | "SAME_LOWER" => Ok((0..nsp)
                .map(|i| {
                    let out = input[i].div_ceil(strides[i]);
                    let eff = (kernel[i] - 1) * dilations[i] + 1;
                    let total = ((out.max(1) - 1) * strides[i] + eff).saturating_sub(input[i]);
                    if auto == "SAME_UPPER" {
                        (total / 2, total - total / 2)
                    } else {
                        (total - total / 2, total / 2)
                    }
                })
                .collect()),
            other => bad(format!("auto_pad '{other}' is not valid")),
        }
    }

    /// strides / dilations attribute: `nsp` positive values, default 1.
    fn window_attr(a: &Attrs, name: &str, nsp: usize) -> R<Vec<usize>> {
        let v = a.ints(name)?.unwrap_or_else(|| vec![1; nsp]);
        if v.len() != nsp || v.iter().any(|&x| x < 1) {
            return bad(format!("{name} {v:?} must be {nsp} positive values"));
        }
        Ok(size_values(&v, name)?)
    }

    pub(super) fn conv(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let w = self.req(n, 1, "W")?;
        let b = self.inp(n, 2)?;
        let Some(wdata) = self.cst(w).cloned() else {
            return bad("weights must be constant");
        };
        if let Some(b) = b {
            if self.cst(b).is_none() {
                return bad("bias must be constant");
            }
        }
        let (xs, ws) = (self.shape(x), self.shape(w));
        if xs.len() != ws.len() || xs.len() < 3 {
            return bad(format!("weights {ws:?} do not match data {xs:?}"));
        }
        if let Some(b) = b {
            if self.shape(b) != [ws[0]] {
                return bad(format!(
                    "bias has shape {:?}, expected [{}] (the weights' output channels)",
                    self.shape(b),
                    ws[0]
                ));
            }
        }
        if xs.len() > 4 {
            return unsup(format!("{}-D convolution is not supported", xs.len() - 2));
        }
        if self.dtype(x) != DType::F32 {
            return unsup(format!(
                "{} convolution is not supported",
                self.dtype(x).name()
            ));
        }
        let nsp = xs.len() - 2;
        let kernel = ws[2..].to_vec();
        if let Some(k) = a.ints("kernel_shape")? {
            if k.len() != nsp || k.iter().zip(&kernel).any(|(&a, &b)| a != b as i64) {
                return bad(format!("kernel_shape {k:?} does not match weights {ws:?}"));
            }
        }
        if kernel.contains(&0) {
            return bad(format!("weights {ws:?} have an empty kernel"));
        }
        let strides = Self::window_attr(a, "strides", nsp)?;
        let dilations = Self::window_attr(a, "dilations", nsp)?;
        let group = size_value(a.int_or("group", 1)?, "group")?;
        let pads = self.spatial_pads(a, &xs[2..], &kernel, &strides, &dilations)?;
        let out = self.out0(n)?;
        if nsp == 2 {
            let op = Op::Conv2d {
                strides: [strides[0], strides[1]],
                dilations: [dilations[0], dilations[1]],
                pads: [pads[0].0, pads[1].0, pads[0].1, pads[1].1],
                group,
                activation: Activation::None,
                layout: Layout::Nchw,
            };
            let mut ins = vec![x, w];
            ins.extend(b);
            self.emit_to(op, &ins, out)?;
            return Ok(());
        }
        // 1-D: [N, C, L] → [N, C, 1, L], Conv2d with H = 1, back to [N, O, L'].
        let x4 = self.emit_tmp(
            Op::Reshape {
                shape: vec![xs[0], xs[1], 1, xs[2]],
            },
            &[x],
            "to2d",
        )?;
        let wname = format!("{}_2d", self.g.tensors[w].name);
        let w4 = self.add_const(&wname, wdata.reshape(&[ws[0], ws[1], 1, ws[2]]));
        // Per output channel (axis 0) still; 1-D weights have no other per-axis form.
        self.g.tensors[w4].quant = self.g.tensors[w]
            .quant
            .clone()
            .filter(|q| !q.is_per_channel() || q.axis == 0);
        let op = Op::Conv2d {
            strides: [1, strides[0]],
            dilations: [1, dilations[0]],
            pads: [0, pads[0].0, 0, pads[0].1],
            group,
            activation: Activation::None,
            layout: Layout::Nchw,
        };
        let mut ins = vec![x4, w4];
        ins.extend(b);
        let y4 = self.emit_tmp(op, &ins, "conv2d")?;
        let ys = self.shape(y4);
        self.emit_to(
            Op::Reshape {
                shape: vec![ys[0], ys[1], ys[3]],
            },
            &[y4],
            out,
        )?;
        Ok(())
    }

    pub(super) fn conv_transpose(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let w = self.req(n, 1, "W")?;
        let b = self.inp(n, 2)?;
        if self.cst(w).is_none() {
            return bad("weights must be constant");
        }
        if let Some(b) = b {
            if self.cst(b).is_none() {
                return bad("bias must be constant");
            }
        }
        let (xs, ws) = (self.shape(x), self.shape(w));
        if xs.len() != 4 || ws.len() != 4 {
            return unsup(format!(
                "only 2-D transposed convolution is supported (data {xs:?}, weights {ws:?})"
            ));
        }
        if ws[0] != xs[1] || xs[2] == 0 || xs[3] == 0 {
            return bad(format!("weights {ws:?} do not match data {xs:?}"));
        }
        let group = a.int_or("group", 1)?;
        if group != 1 {
            return unsup(format!("group {group} is not supported"));
        }
        let dil = Self::window_attr(a, "dilations", 2)?;
        if dil != [1, 1] {
            return unsup(format!("dilations {dil:?} are not supported"));
        }
        let strides = Self::window_attr(a, "strides", 2)?;
        let kernel = [ws[2], ws[3]];
        if kernel.contains(&0) {
            return bad(format!("weights {ws:?} have an empty kernel"));
        }
        let out_pad = a.ints("output_padding")?.unwrap_or_else(|| vec![0, 0]);
        if out_pad.len() != 2 {
            return bad(format!("output_padding {out_pad:?} must have 2 values"));
        }
        let out_pad = size_values(&out_pad, "output_padding")?;
        let auto = a.string_or("auto_pad", "NOTSET")?;
        let input = [xs[2], xs[3]];
        // The full (unpadded) output size per axis.
        let full = |i: usize| strides[i] * (input[i] - 1) + out_pad[i] + kernel[i];
        let mut pads = [0usize; 4];
        let mut size = [0usize; 2];
        let explicit = a.ints("output_shape")?;
        if let Some(os) = explicit.filter(|v| !v.is_empty()) {
            let os = if os.len() == 4 { os[2..].to_vec() } else { os };
            if os.len() != 2 {
                return bad(format!("output_shape {os:?} must have 2 values"));
            }
            let os = dim_values(&os, "output_shape")?;
            for i in 0..2 {
                let total = full(i) as i64 - os[i] as i64;
                if total < 0 {
                    return unsup(format!(
                        "output_shape {os:?} is larger than the full output; not supported"
                    ));
                }
                let t = total as usize;
                let (pb, pe) = if auto == "SAME_UPPER" {
                    (t / 2, t - t / 2)
                } else {
                    (t - t / 2, t / 2)
                };
                pads[i] = pb;
                pads[i + 2] = pe;
                size[i] = os[i];
            }
        } else {
            for i in 0..2 {
                let (pb, pe) = match auto.as_str() {
                    "NOTSET" => {
                        let p = a.ints("pads")?.unwrap_or_else(|| vec![0; 4]);
                        if p.len() != 4 || p.iter().any(|&v| v < 0) {
                            return bad(format!("pads {p:?} must be 4 non-negative values"));
                        }
                        let p = size_values(&p, "pad")?;
                        (p[i], p[i + 2])
                    }
                    "VALID" => (0, 0),
                    "SAME_UPPER" | "SAME_LOWER" => {
                        let t = full(i).saturating_sub(input[i] * strides[i]);
                        if auto == "SAME_UPPER" {
                            (t / 2, t - t / 2)
                        } else {
                            (t - t / 2, t / 2)
                        }
                    }
                    other => return bad(format!("auto_pad '{other}' is not valid")),
                };
                let f = full(i);
                if pb + pe >= f {
                    return bad(format!("pads ({pb}, {pe}) remove the whole output"));
                }
                pads[i] = pb;
                pads[i + 2] = pe;
                size[i] = f - pb - pe;
            }
        }
        let op = Op::ConvTranspose2d {
            strides: [strides[0], strides[1]],
            pads,
            output_size: size,
            activation: Activation::None,
            layout: Layout::Nchw,
        };
        let mut ins = vec![x, w];
        ins.extend(b);
        let out = self.out0(n)?;
        self.emit_to(op, &ins, out)?;
        Ok(())
    }

    /// 1-D pooling ([N, C, L]): the 2-D pool of [N, C, 1, L] with a 1 x k window, between
    /// RESHAPEs.
    fn pool1d(&mut self, n: &NodeProto, x: TensorId, kind: PoolKind) -> R<()> {
        let xs = self.shape(x);
        let mut n2 = n.clone();
        for at in &mut n2.attribute {
            match at.name.as_str() {
                "kernel_shape" | "strides" | "dilations" => at.ints.insert(0, 1),
                "pads" if at.ints.len() == 2 => {
                    let (b, e) = (at.ints[0], at.ints[1]);
                    at.ints = vec![0, b, 0, e];
                }
                _ => {}
            }
        }
        let x4 = self.emit_tmp(
            Op::Reshape {
                shape: vec![xs[0], xs[1], 1, xs[2]],
            },
            &[x],
            "to2d",
        )?;
        let in_name = self.tmp("x2d");
        self.bind(&in_name, x4);
        let out_name = self.tmp("pooled2d");
        n2.input = vec![in_name];
        n2.output.truncate(1);
        n2.output[0] = out_name.clone();
        let a2 = Attrs::new(&n2);
        self.pool(&n2, &a2, kind)?;
        let Some(&y4) = self.values.get(&out_name) else {
            return bad("1-D pooling produced no output");
        };
        let ys = self.shape(y4);
        let out = self.out0(n)?;
        self.emit_to(
            Op::Reshape {
                shape: vec![ys[0], ys[1], ys[3]],
            },
            &[y4],
            out,
        )?;
        Ok(())
    }

    pub(super) fn pool(&mut self, n: &NodeProto, a: &Attrs, kind: PoolKind) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        if xs.len() == 3 {
            if kind == PoolKind::Max && n.output.get(1).is_some_and(|o| self.used(o)) {
                return unsup("the Indices output is used");
            }
            return self.pool1d(n, x, kind);
        }
        if xs.len() != 4 {
            return unsup(format!(
                "{}-D pooling is not supported",
                xs.len().saturating_sub(2)
            ));
        }
        if kind == PoolKind::Max && n.output.get(1).is_some_and(|o| self.used(o)) {
            return unsup("the Indices output is used");
        }
        let Some(k) = a.ints("kernel_shape")? else {
            return bad("kernel_shape is required");
        };
        if k.len() != 2 || k.iter().any(|&v| v < 1) {
            return bad(format!("kernel_shape {k:?} must be 2 positive values"));
        }
        let kernel = size_values(&k, "kernel")?;
        let strides = Self::window_attr(a, "strides", 2)?;
        let dil = Self::window_attr(a, "dilations", 2)?;
        if dil != [1, 1] {
            return unsup(format!("dilations {dil:?} are not supported"));
        }
        if a.int_or("storage_order", 0)? != 0 {
            return unsup("storage_order 1 is not supported");
        }
        let ceil = a.int_or("ceil_mode", 0)? != 0;
        let include_pad = kind == PoolKind::Average && a.int_or("count_include_pad", 0)? != 0;
        let input = [xs[2], xs[3]];
        let sp = self.spatial_pads(a, &input, &kernel, &strides, &[1, 1])?;
        let mut extra = [0usize; 2];
        for i in 0..2 {
            let padded = input[i] + sp[i].0 + sp[i].1;
            if padded < kernel[i] {
                return bad(format!(
                    "kernel {kernel:?} is larger than the padded input {xs:?}"
                ));
            }
            if ceil {
                let span = padded - kernel[i];
                let mut out = span.div_ceil(strides[i]) + 1;
                // The last window must start inside the input or the begin padding.
                if (out - 1) * strides[i] >= input[i] + sp[i].0 {
                    out -= 1;
                }
                extra[i] = ((out - 1) * strides[i] + kernel[i]).saturating_sub(padded);
            }
        }
        let mut pads = [sp[0].0, sp[1].0, sp[0].1 + extra[0], sp[1].1 + extra[1]];
        let mut src = x;
        if include_pad && sp.iter().any(|&(b, e)| b + e > 0) {
            if extra != [0, 0] {
                return unsup("count_include_pad=1 with ceil_mode is not supported");
            }
            src = self.emit_tmp(
                Op::Pad {
                    before: vec![0, 0, sp[0].0, sp[1].0],
                    after: vec![0, 0, sp[0].1, sp[1].1],
                    mode: PadMode::Constant,
                    value: 0.0,
                },
                &[x],
                "pad",
            )?;
            pads = [0; 4];
        } else if include_pad && extra != [0, 0] {
            return unsup("count_include_pad=1 with ceil_mode is not supported");
        }
        let op = Op::Pool2d {
            kind,
            kernel: [kernel[0], kernel[1]],
            strides: [strides[0], strides[1]],
            pads,
            layout: Layout::Nchw,
        };
        let out = self.out0(n)?;
        self.emit_to(op, &[src], out)?;
        Ok(())
    }

    /// LpPool: `(sum over the window of |x|^p)^(1/p)`, zero padding included, as an average
    /// pool that counts the padding, times the window size.
    pub(super) fn lp_pool(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        if self.dtype(x) != DType::F32 {
            return unsup(format!(
                "LpPool of {} is not supported",
                self.dtype(x).name()
            ));
        }
        let p = a.int_or("p", 2)?;
        if p < 1 {
            return bad(format!("p {p} must be positive"));
        }
        let Some(k) = a.ints("kernel_shape")? else {
            return bad("kernel_shape is required");
        };
        let window: usize = size_values(&k, "kernel")?.iter().product();
        let abs = self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?;
        let powered = match p {
            1 => abs,
            2 => self.emit_tmp(bin(BinaryOp::Mul), &[abs, abs], "square")?,
            _ => {
                let e = self.scalar(p as f32, DType::F32, "p");
                self.emit_tmp(bin(BinaryOp::Pow), &[abs, e], "power")?
            }
        };
        // The same node as an AveragePool over |x|^p that counts the padding.
        let mut avg = n.clone();
        avg.op_type = "AveragePool".into();
        avg.attribute
            .retain(|at| at.name != "p" && at.name != "count_include_pad");
        avg.attribute.push(AttributeProto {
            name: "count_include_pad".into(),
            i: 1,
            r#type: AttributeType::Int as i32,
            ..Default::default()
        });
        let in_name = self.tmp("powered");
        self.bind(&in_name, powered);
        let out_name = self.tmp("power_average");
        avg.input = vec![in_name];
        avg.output = vec![out_name.clone()];
        self.pool(&avg, &Attrs::new(&avg), PoolKind::Average)?;
        let Some(&mean) = self.values.get(&out_name) else {
            return bad("LpPool's average pool produced no output");
        };
        let count = self.scalar(window as f32, DType::F32, "window");
        let sum = self.emit_tmp(bin(BinaryOp::Mul), &[mean, count], "power_sum")?;
        let out = self.out0(n)?;
        match p {
            1 => self.bind(out, sum),
            2 => {
                self.emit_to(Op::Unary(UnaryOp::Sqrt), &[sum], out)?;
            }
            _ => {
                let e = self.scalar(1.0 / p as f32, DType::F32, "inv_p");
                self.emit_to(bin(BinaryOp::Pow), &[sum, e], out)?;
            }
        }
        Ok(())
    }

    pub(super) fn global_pool(&mut self, n: &NodeProto, op: ReduceOp) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let rank = self.shape(x).len();
        if rank < 3 {
            return bad(format!("expects data of rank ≥ 3, got rank {rank}"));
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::Reduce {
                op,
                axes: (2..rank).collect(),
                keep_dims: true,
            },
            &[x],
            out,
        )?;
        Ok(())
    }
}
