//! Shape arithmetic evaluated before running: a RESHAPE whose shape input is computed from
//! SHAPE (STRIDED_SLICE, MUL, FLOOR_DIV, ADD, PACK on INT32), with placeholder shapes in the
//! file after it, as TensorFlow's converter writes for a dynamic batch.
#![cfg(feature = "dynamic-shapes")]

mod common;

use common::{opts, ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B, TensorType as T};
use literun::{Interpreter, Model};

/// x [2, 3, 4] reshaped to [a, -1] with a = floor((3 * 2) / -4) + 4 = 2, i.e. [2, 12] (a
/// truncating division would give [3, 8]). `sliced` also reads the last dimension (end mask).
fn model() -> literun::AlignedBytes {
    let mut m = ModelBuilder::new();
    let i32s = |m: &mut ModelBuilder, name: &str, shape: &[i32]| m.tensor(name, shape, T::INT32);
    let x = m.f32("x", &[2, 3, 4]);
    let shape = i32s(&mut m, "shape", &[3]);
    m.op(B::SHAPE, &[x], &[shape], None);
    let (b1, e0, one) = (
        m.const_i32("b1", &[1], &[1]),
        m.const_i32("e0", &[1], &[0]),
        m.const_i32("one", &[1], &[1]),
    );
    let d1 = i32s(&mut m, "d1", &[]);
    let shrink = vec![F::I32(s::StridedSliceOptions::VT_SHRINK_AXIS_MASK, 1)];
    m.op(
        B::STRIDED_SLICE,
        &[shape, b1, e0, one],
        &[d1],
        opts(32, shrink),
    );
    let bm1 = m.const_i32("bm1", &[1], &[-1]);
    let last = i32s(&mut m, "last", &[1]);
    let end_mask = vec![F::I32(s::StridedSliceOptions::VT_END_MASK, 1)];
    m.op(
        B::STRIDED_SLICE,
        &[shape, bm1, e0, one],
        &[last],
        opts(32, end_mask),
    );
    let two = m.const_i32("two", &[], &[2]);
    let six = i32s(&mut m, "six", &[]);
    m.op(B::MUL, &[d1, two], &[six], None);
    let minus4 = m.const_i32("minus4", &[], &[-4]);
    let q = i32s(&mut m, "q", &[]);
    m.op(B::FLOOR_DIV, &[six, minus4], &[q], None);
    let four = m.const_i32("four", &[], &[4]);
    let a = i32s(&mut m, "a", &[]);
    m.op(B::ADD, &[q, four], &[a], None);
    let free = m.const_i32("free", &[], &[-1]);
    let target = i32s(&mut m, "target", &[2]);
    let pack = vec![F::I32(s::PackOptions::VT_VALUES_COUNT, 2)];
    m.op(B::PACK, &[a, free], &[target], opts(59, pack));
    // Placeholder shapes, as TensorFlow writes them after a computed RESHAPE.
    let y = m.f32("y", &[1, 1]);
    m.op(B::RESHAPE, &[x, target], &[y], None);
    let z = m.f32("z", &[1, 1]);
    let half = m.const_f32("half", &[], &[0.5]);
    m.op(B::MUL, &[y, half], &[z], None);
    m.finish(&[x], &[z, last])
}

#[test]
fn computed_shapes_replace_the_placeholders() {
    let bytes = model();
    let m = Model::from_bytes(&bytes).unwrap();
    let mut it = Interpreter::new(&m).unwrap();
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    it.input_mut(0)
        .unwrap()
        .as_f32_mut()
        .unwrap()
        .copy_from_slice(&x);
    it.invoke().unwrap();
    let z = it.output(0).unwrap();
    assert_eq!(z.shape(), &[2, 12]);
    let want: Vec<f32> = x.iter().map(|v| v * 0.5).collect();
    assert_eq!(z.as_f32().unwrap(), &want[..]);
    let last = it.output(1).unwrap();
    assert_eq!(last.as_i32().unwrap(), &[4]);
}
