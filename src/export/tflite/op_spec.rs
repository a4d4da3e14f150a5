//! One IR node → the TFLite operator that writes it: builtin code, version, inputs and options.

use super::{activation, ids, narrow_i64, tensor_type, OpSpec, Writer};
use crate::ir::{
    Activation, BinaryOp, DType, Graph, Layout, Node, Op, PadMode, PoolKind, ReduceOp,
    ResizeCoords, ResizeMode, UnaryOp,
};
use anyhow::{anyhow, bail, Result};
use literun::schema as fb;

mod layers;

pub(super) fn op_spec<'a>(w: &mut Writer<'_>, node: &Node) -> Result<OpSpec<'a>> {
    use fb::BuiltinOperator as B;
    let g = w.g;
    let inputs = ids(&node.inputs);
    let outputs = ids(&node.outputs);
    let in_shape = |i: usize| g.shape(node.inputs[i]).to_vec();
    let out_shape = g.shape(node.outputs[0]).to_vec();
    let x_type = g.tensors[node.inputs[0]].dtype;
    let fbb = &mut w.fbb;
    let mut spec = OpSpec {
        code: B::ADD,
        version: 1,
        inputs,
        outputs,
        options: None,
        _p: Default::default(),
    };
    macro_rules! opts {
        ($variant:ident, $table:ident, $args:expr) => {{
            let o = fb::$table::create(fbb, &$args);
            spec.options = Some((fb::BuiltinOptions::$variant, o.as_union_value()));
        }};
    }
    match &node.op {
        Op::Conv2d {
            layout: Layout::Nhwc,
            ..
        } => layers::conv2d(w, node, &mut spec)?,
        Op::ConvTranspose2d {
            layout: Layout::Nhwc,
            ..
        } => layers::conv_transpose2d(w, node, &mut spec)?,
        Op::FullyConnected { .. } => layers::fully_connected(w, node, &mut spec)?,
        Op::MatMul { .. } => layers::matmul(w, node, &mut spec)?,
        Op::Binary {
            op,
            activation: act,
        } => {
            let rank = out_shape.len();
            let bcast = in_shape(0) != in_shape(1);
            let a = activation(*act);
            match op {
                BinaryOp::Add => {
                    spec.code = B::ADD;
                    spec.version = if x_type == DType::I64 { 4 } else { 1 };
                    opts!(
                        AddOptions,
                        AddOptions,
                        fb::AddOptionsArgs {
                            fused_activation_function: a,
                            // The general int16 kernel (any scales; 16x8 activations).
                            pot_scale_int16: x_type != DType::I16
                        }
                    );
                }
                BinaryOp::Sub => {
                    spec.code = B::SUB;
                    spec.version = if x_type == DType::I64 {
                        4
                    } else if rank > 4 && bcast {
                        3
                    } else {
                        1
                    };
                    opts!(
                        SubOptions,
                        SubOptions,
                        fb::SubOptionsArgs {
                            fused_activation_function: a,
                            // The general int16 kernel (any scales; 16x8 activations).
                            pot_scale_int16: x_type != DType::I16
                        }
                    );
                }
                BinaryOp::Mul => {
                    spec.code = B::MUL;
                    spec.version = if x_type == DType::I64 { 5 } else { 1 };
                    opts!(
                        MulOptions,
                        MulOptions,
                        fb::MulOptionsArgs {
                            fused_activation_function: a
                        }
                    );
                }
                BinaryOp::Div => {
                    spec.code = B::DIV;
                    spec.version = if rank > 4 && bcast { 2 } else { 1 };
                    opts!(
                        DivOptions,
                        DivOptions,
                        fb::DivOptionsArgs {
                            fused_activation_function: a
                        }
                    );
                }
                BinaryOp::Pow => {
                    spec.code = B::POW;
                    opts!(PowOptions, PowOptions, fb::PowOptionsArgs {});
                }
                BinaryOp::Max | BinaryOp::Min => {
                    spec.code = if *op == BinaryOp::Max {
                        B::MAXIMUM
                    } else {
                        B::MINIMUM
                    };
                    spec.version = if rank > 4 && bcast { 3 } else { 1 };
                    opts!(
                        MaximumMinimumOptions,
                        MaximumMinimumOptions,
                        fb::MaximumMinimumOptionsArgs {}
                    );
                }
                BinaryOp::FloorMod => {
                    spec.code = B::FLOOR_MOD;
                    opts!(FloorModOptions, FloorModOptions, fb::FloorModOptionsArgs {});
                }
                BinaryOp::SquaredDifference => {
                    spec.code = B::SQUARED_DIFFERENCE;
                    opts!(
                        SquaredDifferenceOptions,
                        SquaredDifferenceOptions,
                        fb::SquaredDifferenceOptionsArgs {}
                    );
                }
            }
            if *act != Activation::None
                && matches!(
                    op,
                    BinaryOp::Pow
                        | BinaryOp::Max
                        | BinaryOp::Min
                        | BinaryOp::SquaredDifference
                        | BinaryOp::FloorMod
                )
            {
                bail!("no fused activation on {:?}", op);
            }
        }
        Op::Unary(u) => match u {
            UnaryOp::Abs => spec.code = B::ABS,
            UnaryOp::Neg => spec.code = B::NEG,
            UnaryOp::Exp => spec.code = B::EXP,
            UnaryOp::Log => spec.code = B::LOG,
            UnaryOp::Sqrt => spec.code = B::SQRT,
            UnaryOp::Rsqrt => spec.code = B::RSQRT,
            UnaryOp::Relu => spec.code = B::RELU,
            UnaryOp::Relu6 => spec.code = B::RELU6,
            UnaryOp::ReluN1To1 => spec.code = B::RELU_N1_TO_1,
            UnaryOp::Sigmoid => spec.code = B::LOGISTIC,
            UnaryOp::Tanh => spec.code = B::TANH,
            UnaryOp::HardSwish => spec.code = B::HARD_SWISH,
            UnaryOp::Floor => spec.code = B::FLOOR,
            UnaryOp::Ceil => spec.code = B::CEIL,
            UnaryOp::Round => spec.code = B::ROUND,
            UnaryOp::Sin => spec.code = B::SIN,
            UnaryOp::Cos => spec.code = B::COS,
            UnaryOp::Gelu { approximate } => {
                spec.code = B::GELU;
                opts!(
                    GeluOptions,
                    GeluOptions,
                    fb::GeluOptionsArgs {
                        approximate: *approximate
                    }
                );
            }
            UnaryOp::LeakyRelu { alpha } => {
                spec.code = B::LEAKY_RELU;
                opts!(
                    LeakyReluOptions,
                    LeakyReluOptions,
                    fb::LeakyReluOptionsArgs { alpha: *alpha }
                );
            }
            UnaryOp::Erf => bail!("TFLite has no Erf operator"),
            UnaryOp::Silu => bail!("SiLU must be lowered to LOGISTIC + MUL before export"),
        },
        Op::PRelu => spec.code = B::PRELU,
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            if *axis + 1 != out_shape.len() {
                bail!("softmax over a non-last axis must be moved last by the layout pass");
            }
            if matches!(node.op, Op::Softmax { .. }) {
                spec.code = B::SOFTMAX;
                opts!(
                    SoftmaxOptions,
                    SoftmaxOptions,
                    fb::SoftmaxOptionsArgs { beta: 1.0 }
                );
            } else {
                spec.code = B::LOG_SOFTMAX;
                opts!(
                    LogSoftmaxOptions,
                    LogSoftmaxOptions,
                    fb::LogSoftmaxOptionsArgs {}
                );
            }
        }
        Op::Pool2d {
            kind,
            kernel,
            strides,
            pads,
            layout: Layout::Nhwc,
        } => {
            let x = in_shape(0);
            let pad = padding(x[1], x[2], *kernel, *strides, [1, 1], *pads)?;
            spec.code = if *kind == PoolKind::Max {
                B::MAX_POOL_2D
            } else {
                B::AVERAGE_POOL_2D
            };
            opts!(
                Pool2DOptions,
                Pool2DOptions,
                fb::Pool2DOptionsArgs {
                    padding: pad,
                    stride_w: strides[1] as i32,
                    stride_h: strides[0] as i32,
                    filter_width: kernel[1] as i32,
                    filter_height: kernel[0] as i32,
                    fused_activation_function: fb::ActivationFunctionType::NONE,
                }
            );
        }
        Op::Reduce {
            op,
            axes,
            keep_dims,
        } => {
            spec.code = match op {
                ReduceOp::Mean => B::MEAN,
                ReduceOp::Sum => B::SUM,
                ReduceOp::Max => B::REDUCE_MAX,
                ReduceOp::Min => B::REDUCE_MIN,
                ReduceOp::Prod => B::REDUCE_PROD,
            };
            let axes_t = w.const_i32(
                format!("{}/axes", node.name),
                &[axes.len()],
                axes.iter().map(|&a| a as i32).collect(),
            );
            spec.inputs.push(axes_t);
            let fbb = &mut w.fbb;
            let o = fb::ReducerOptions::create(
                fbb,
                &fb::ReducerOptionsArgs {
                    keep_dims: *keep_dims,
                },
            );
            spec.options = Some((fb::BuiltinOptions::ReducerOptions, o.as_union_value()));
        }
        Op::Concat { axis } => {
            spec.code = B::CONCATENATION;
            opts!(
                ConcatenationOptions,
                ConcatenationOptions,
                fb::ConcatenationOptionsArgs {
                    axis: *axis as i32,
                    fused_activation_function: fb::ActivationFunctionType::NONE
                }
            );
        }
        Op::Split { axis, sizes } => {
            let axis_t = w.const_i32(format!("{}/axis", node.name), &[], vec![*axis as i32]);
            if sizes.iter().all(|&s| s == sizes[0]) {
                spec.code = B::SPLIT;
                spec.inputs = vec![axis_t, node.inputs[0] as i32];
                let fbb = &mut w.fbb;
                let o = fb::SplitOptions::create(
                    fbb,
                    &fb::SplitOptionsArgs {
                        num_splits: sizes.len() as i32,
                    },
                );
                spec.options = Some((fb::BuiltinOptions::SplitOptions, o.as_union_value()));
            } else {
                spec.code = B::SPLIT_V;
                let sizes_t = w.const_i32(
                    format!("{}/sizes", node.name),
                    &[sizes.len()],
                    sizes.iter().map(|&s| s as i32).collect(),
                );
                spec.inputs = vec![node.inputs[0] as i32, sizes_t, axis_t];
                let fbb = &mut w.fbb;
                let o = fb::SplitVOptions::create(
                    fbb,
                    &fb::SplitVOptionsArgs {
                        num_splits: sizes.len() as i32,
                    },
                );
                spec.options = Some((fb::BuiltinOptions::SplitVOptions, o.as_union_value()));
            }
        }
        Op::Slice {
            begins,
            ends,
            steps,
        } => {
            let x = in_shape(0);
            let rank = x.len();
            let mut b = Vec::with_capacity(rank);
            let mut e = Vec::with_capacity(rank);
            let mut end_mask = 0;
            for i in 0..rank {
                let (cb, ce) = crate::ir::shape::clamp_slice(x[i], begins[i], ends[i], steps[i]);
                b.push(cb as i32);
                if ce < 0 {
                    end_mask |= 1 << i; // "to the start" for a negative step
                    e.push(0);
                } else {
                    e.push(ce as i32);
                }
            }
            if steps.iter().all(|&s| s == 1) {
                spec.code = B::SLICE;
                let size: Vec<i32> = out_shape.iter().map(|&d| d as i32).collect();
                let bt = w.const_i32(format!("{}/begin", node.name), &[rank], b);
                let st = w.const_i32(format!("{}/size", node.name), &[rank], size);
                spec.inputs = vec![node.inputs[0] as i32, bt, st];
                spec.version = if rank > 4 { 5 } else { 1 };
                let fbb = &mut w.fbb;
                let o = fb::SliceOptions::create(fbb, &fb::SliceOptionsArgs {});
                spec.options = Some((fb::BuiltinOptions::SliceOptions, o.as_union_value()));
            } else {
                spec.code = B::STRIDED_SLICE;
                let bt = w.const_i32(format!("{}/begin", node.name), &[rank], b);
                let et = w.const_i32(format!("{}/end", node.name), &[rank], e);
                let stt = w.const_i32(
                    format!("{}/strides", node.name),
                    &[rank],
                    steps.iter().map(|&s| s as i32).collect(),
                );
                spec.inputs = vec![node.inputs[0] as i32, bt, et, stt];
                spec.version = if rank > 4 { 4 } else { 1 };
                let fbb = &mut w.fbb;
                let o = fb::StridedSliceOptions::create(
                    fbb,
                    &fb::StridedSliceOptionsArgs {
                        end_mask,
                        ..Default::default()
                    },
                );
                spec.options = Some((fb::BuiltinOptions::StridedSliceOptions, o.as_union_value()));
            }
        }
        Op::Gather { axis } => {
            spec.code = B::GATHER;
            opts!(
                GatherOptions,
                GatherOptions,
                fb::GatherOptionsArgs {
                    axis: *axis as i32,
                    batch_dims: 0
                }
            );
        }
        Op::Reshape { shape } => {
            spec.code = B::RESHAPE;
            let s: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
            let st = w.const_i32(format!("{}/shape", node.name), &[s.len()], s.clone());
            spec.inputs = vec![node.inputs[0] as i32, st];
            let fbb = &mut w.fbb;
            let ns = fbb.create_vector(&s);
            let o = fb::ReshapeOptions::create(
                fbb,
                &fb::ReshapeOptionsArgs {
                    new_shape: Some(ns),
                },
            );
            spec.options = Some((fb::BuiltinOptions::ReshapeOptions, o.as_union_value()));
        }
        Op::Transpose { perm } => {
            spec.code = B::TRANSPOSE;
            spec.version = match perm.len() {
                0..=4 => 1,
                5 => 4,
                _ => 6,
            };
            let pt = w.const_i32(
                format!("{}/perm", node.name),
                &[perm.len()],
                perm.iter().map(|&p| p as i32).collect(),
            );
            spec.inputs.push(pt);
            let fbb = &mut w.fbb;
            let o = fb::TransposeOptions::create(fbb, &fb::TransposeOptionsArgs {});
            spec.options = Some((fb::BuiltinOptions::TransposeOptions, o.as_union_value()));
        }
        Op::Expand { .. } => {
            spec.code = B::BROADCAST_TO;
            spec.version = 2;
            let st = w.const_i32(
                format!("{}/shape", node.name),
                &[out_shape.len()],
                out_shape.iter().map(|&d| d as i32).collect(),
            );
            spec.inputs.push(st);
            let fbb = &mut w.fbb;
            let o = fb::BroadcastToOptions::create(fbb, &fb::BroadcastToOptionsArgs {});
            spec.options = Some((fb::BuiltinOptions::BroadcastToOptions, o.as_union_value()));
        }
        Op::Tile { reps } => {
            spec.code = B::TILE;
            let rt = w.const_i32(
                format!("{}/multiples", node.name),
                &[reps.len()],
                reps.iter().map(|&r| r as i32).collect(),
            );
            spec.inputs.push(rt);
            let fbb = &mut w.fbb;
            let o = fb::TileOptions::create(fbb, &fb::TileOptionsArgs {});
            spec.options = Some((fb::BuiltinOptions::TileOptions, o.as_union_value()));
        }
        Op::Pad {
            before,
            after,
            mode,
            value,
        } => {
            let rank = before.len();
            let p: Vec<i32> = (0..rank)
                .flat_map(|i| [before[i] as i32, after[i] as i32])
                .collect();
            let pt = w.const_i32(format!("{}/paddings", node.name), &[rank, 2], p);
            spec.inputs.push(pt);
            match mode {
                PadMode::Constant if *value == 0.0 => {
                    spec.code = B::PAD;
                    spec.version = if rank > 4 { 4 } else { 1 };
                    let fbb = &mut w.fbb;
                    let o = fb::PadOptions::create(fbb, &fb::PadOptionsArgs {});
                    spec.options = Some((fb::BuiltinOptions::PadOptions, o.as_union_value()));
                }
                PadMode::Constant => {
                    spec.code = B::PADV2;
                    spec.version = if rank > 4 { 4 } else { 1 };
                    let vt = w.pad_value(node, *value);
                    spec.inputs.push(vt);
                    let fbb = &mut w.fbb;
                    let o = fb::PadV2Options::create(fbb, &fb::PadV2OptionsArgs {});
                    spec.options = Some((fb::BuiltinOptions::PadV2Options, o.as_union_value()));
                }
                PadMode::Reflect | PadMode::Symmetric => {
                    spec.code = B::MIRROR_PAD;
                    let m = if *mode == PadMode::Reflect {
                        fb::MirrorPadMode::REFLECT
                    } else {
                        fb::MirrorPadMode::SYMMETRIC
                    };
                    let fbb = &mut w.fbb;
                    let o =
                        fb::MirrorPadOptions::create(fbb, &fb::MirrorPadOptionsArgs { mode: m });
                    spec.options = Some((fb::BuiltinOptions::MirrorPadOptions, o.as_union_value()));
                }
            }
        }
        Op::Resize {
            mode,
            coords,
            size,
            layout: Layout::Nhwc,
        } => {
            let st = w.const_i32(
                format!("{}/size", node.name),
                &[2],
                vec![size[0] as i32, size[1] as i32],
            );
            spec.inputs.push(st);
            let align_corners = *coords == ResizeCoords::AlignCorners;
            let half_pixel_centers = *coords == ResizeCoords::HalfPixel;
            let fbb = &mut w.fbb;
            match mode {
                ResizeMode::Bilinear => {
                    spec.code = B::RESIZE_BILINEAR;
                    spec.version = if half_pixel_centers { 3 } else { 1 };
                    let o = fb::ResizeBilinearOptions::create(
                        fbb,
                        &fb::ResizeBilinearOptionsArgs {
                            align_corners,
                            half_pixel_centers,
                        },
                    );
                    spec.options = Some((
                        fb::BuiltinOptions::ResizeBilinearOptions,
                        o.as_union_value(),
                    ));
                }
                ResizeMode::Nearest => {
                    spec.code = B::RESIZE_NEAREST_NEIGHBOR;
                    spec.version = if half_pixel_centers || align_corners {
                        3
                    } else {
                        1
                    };
                    let o = fb::ResizeNearestNeighborOptions::create(
                        fbb,
                        &fb::ResizeNearestNeighborOptionsArgs {
                            align_corners,
                            half_pixel_centers,
                        },
                    );
                    spec.options = Some((
                        fb::BuiltinOptions::ResizeNearestNeighborOptions,
                        o.as_union_value(),
                    ));
                }
            }
        }
        Op::ArgMax {
            axis,
            keep_dims: false,
        }
        | Op::ArgMin {
            axis,
            keep_dims: false,
        } => {
            let max = matches!(node.op, Op::ArgMax { .. });
            spec.code = if max { B::ARG_MAX } else { B::ARG_MIN };
            let at = w.const_i32(format!("{}/axis", node.name), &[1], vec![*axis as i32]);
            spec.inputs.push(at);
            let output_type = tensor_type(g.tensors[node.outputs[0]].dtype);
            let fbb = &mut w.fbb;
            spec.options = Some(if max {
                let o = fb::ArgMaxOptions::create(fbb, &fb::ArgMaxOptionsArgs { output_type });
                (fb::BuiltinOptions::ArgMaxOptions, o.as_union_value())
            } else {
                let o = fb::ArgMinOptions::create(fbb, &fb::ArgMinOptionsArgs { output_type });
                (fb::BuiltinOptions::ArgMinOptions, o.as_union_value())
            });
        }
        Op::Compare { op } => {
            use crate::ir::CompareOp as C;
            spec.code = match op {
                C::Equal => B::EQUAL,
                C::NotEqual => B::NOT_EQUAL,
                C::Less => B::LESS,
                C::LessEqual => B::LESS_EQUAL,
                C::Greater => B::GREATER,
                C::GreaterEqual => B::GREATER_EQUAL,
            };
        }
        Op::Logical { and } => {
            spec.code = if *and { B::LOGICAL_AND } else { B::LOGICAL_OR };
        }
        Op::Not => spec.code = B::LOGICAL_NOT,
        Op::Where => spec.code = B::SELECT_V2,
        Op::TopK { axis, k } => {
            if *axis + 1 != in_shape(0).len() {
                bail!("TOPK_V2 works on the last axis, not axis {axis} (the layout pass should have moved it)");
            }
            spec.code = B::TOPK_V2;
            let kt = w.const_i32(format!("{}/k", node.name), &[], vec![*k as i32]);
            spec.inputs.push(kt);
        }
        Op::Cast { to } => {
            spec.code = B::CAST;
            opts!(
                CastOptions,
                CastOptions,
                fb::CastOptionsArgs {
                    in_data_type: tensor_type(x_type),
                    out_data_type: tensor_type(*to)
                }
            );
        }
        Op::DepthToSpace {
            block,
            layout: Layout::Nhwc,
        } => {
            spec.code = B::DEPTH_TO_SPACE;
            opts!(
                DepthToSpaceOptions,
                DepthToSpaceOptions,
                fb::DepthToSpaceOptionsArgs {
                    block_size: i32_option(*block, "block size")?
                }
            );
        }
        Op::SpaceToDepth {
            block,
            layout: Layout::Nhwc,
        } => {
            spec.code = B::SPACE_TO_DEPTH;
            opts!(
                SpaceToDepthOptions,
                SpaceToDepthOptions,
                fb::SpaceToDepthOptionsArgs {
                    block_size: i32_option(*block, "block size")?
                }
            );
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            spec.code = B::CUMSUM;
            let at = w.const_i32(format!("{}/axis", node.name), &[], vec![*axis as i32]);
            spec.inputs.push(at);
            let fbb = &mut w.fbb;
            let o = fb::CumsumOptions::create(
                fbb,
                &fb::CumsumOptionsArgs {
                    exclusive: *exclusive,
                    reverse: *reverse,
                },
            );
            spec.options = Some((fb::BuiltinOptions::CumsumOptions, o.as_union_value()));
        }
        Op::SequenceLstm { time_major } => {
            spec.code = B::UNIDIRECTIONAL_SEQUENCE_LSTM;
            let x = in_shape(0);
            let batch = if *time_major { x[1] } else { x[0] };
            let cell = in_shape(1)[0];
            let h = w.add_variable(format!("{}/output_state", node.name), &[batch, cell]);
            let c = w.add_variable(format!("{}/cell_state", node.name), &[batch, cell]);
            // TFLite's 24 inputs: x, input and recurrent weights, no peepholes, biases, no
            // projection, the two states, no layer normalization.
            let given = ids(&node.inputs);
            let mut inputs = given[..9].to_vec();
            inputs.extend([-1; 3]);
            inputs.extend(&given[9..13]);
            inputs.extend([-1, -1, h, c]);
            inputs.extend([-1; 4]);
            spec.inputs = inputs;
            let fbb = &mut w.fbb;
            let o = fb::UnidirectionalSequenceLSTMOptions::create(
                fbb,
                &fb::UnidirectionalSequenceLSTMOptionsArgs {
                    fused_activation_function: fb::ActivationFunctionType::TANH,
                    time_major: *time_major,
                    ..Default::default()
                },
            );
            spec.options = Some((
                fb::BuiltinOptions::UnidirectionalSequenceLSTMOptions,
                o.as_union_value(),
            ));
        }
        // DynamicUpdateSliceOptions is an empty table: no options are written.
        Op::DynamicUpdateSlice => spec.code = B::DYNAMIC_UPDATE_SLICE,
        Op::If { .. } | Op::While { .. } => {
            // IfOptions (then_subgraph_index, else_subgraph_index) and WhileOptions
            // (cond_subgraph_index, body_subgraph_index): two int32 fields, written by hand (the
            // bundled schema subset lacks both tables).
            let (code, tag) = match node.op {
                Op::If { .. } => (B::IF, IF_OPTIONS),
                _ => (B::WHILE, WHILE_OPTIONS),
            };
            spec.code = code;
            let first = w.next_subgraph;
            w.next_subgraph += 2;
            let index = |i: usize| {
                i32::try_from(i).map_err(|_| anyhow!("subgraph index {i} does not fit an int32"))
            };
            let (first, second) = (index(first)?, index(first + 1)?);
            let fbb = &mut w.fbb;
            let start = fbb.start_table();
            fbb.push_slot::<i32>(4, first, 0);
            fbb.push_slot::<i32>(6, second, 0);
            let o = fbb.end_table(start);
            spec.options = Some((fb::BuiltinOptions(tag), o.as_union_value()));
        }
        Op::Dequantize => spec.code = B::DEQUANTIZE,
        Op::Quantize => spec.code = B::QUANTIZE,
        other => bail!(
            "no TFLite operator for {} here (the lowering pass should have rewritten it)",
            other.name()
        ),
    }
    // Integer and hybrid kernels have their own versions.
    let input1 = node.inputs.get(1).map(|&t| written_dtype(g, t));
    let per_channel = node.inputs[..node.inputs.len().min(2)].iter().any(|&t| {
        g.tensors[t]
            .quant
            .as_ref()
            .is_some_and(|q| q.is_per_channel())
    });
    spec.version = crate::export::versions::for_types(
        spec.code,
        spec.version,
        &crate::export::versions::TypeSig {
            input0: written_dtype(g, node.inputs[0]),
            input1,
            output0: written_dtype(g, node.outputs[0]),
            per_channel,
        },
    );
    Ok(spec)
}

/// TFLite's padding for a window of `k` with strides `s` and dilations `d` over an `h` x `w`
/// input padded by `pads`: VALID or SAME, which the lowering pass made every padding.
fn padding(
    h: usize,
    w: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pads: [usize; 4],
) -> Result<fb::Padding> {
    if pads == [0; 4] {
        return Ok(fb::Padding::VALID);
    }
    if crate::passes::lower::is_same(h, w, k, s, d, pads) {
        return Ok(fb::Padding::SAME);
    }
    Err(anyhow!(
        "padding {pads:?} is neither SAME nor VALID (the lowering pass should have made it so)"
    ))
}

/// The `BuiltinOptions` tags of `IfOptions` and `WhileOptions`.
const IF_OPTIONS: u8 = 92;
const WHILE_OPTIONS: u8 = 93;

/// `value` as an int32 option field, or an error naming `what`.
fn i32_option(value: usize, what: &str) -> Result<i32> {
    i32::try_from(value).map_err(|_| anyhow!("{what} {value} does not fit an int32 option"))
}

/// The element type a tensor is written with (int64 constants are narrowed when they fit).
fn written_dtype(g: &Graph, t: usize) -> DType {
    match &g.tensors[t].data {
        Some(d) => narrow_i64(d, g.tensors[t].quant.is_some()).dtype(),
        None => g.tensors[t].dtype,
    }
}

#[cfg(test)]
#[path = "op_spec_tests.rs"]
mod tests;
