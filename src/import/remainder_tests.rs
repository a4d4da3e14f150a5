//! ONNX Mod: `fmod=0` as TFLite FLOOR_MOD, `fmod=1` folded on constants and refused otherwise.

use super::builder::{ftensor, itensor, Attr as A, OnnxBuilder as B};
use crate::convert::{convert_bytes, ConvertOptions};
use crate::npy::{NpyArray, NpyData};

fn modulo(fmod: i64, elem_type: i32) -> B {
    let mut b = B::new(13);
    b.typed_input("x", &[6], elem_type)
        .typed_input("y", &[6], elem_type)
        .node(
            "Mod",
            "mod",
            &["x", "y"],
            &["z"],
            vec![("fmod", A::I(fmod))],
        )
        .output("z");
    b
}

fn run(b: &B, inputs: Vec<(&str, NpyArray)>) -> NpyArray {
    let conv = convert_bytes(&b.bytes(), "model.onnx", &ConvertOptions::default()).unwrap();
    let named: Vec<(Option<String>, NpyArray)> = inputs
        .into_iter()
        .map(|(n, a)| (Some(n.to_string()), a))
        .collect();
    let mut out = crate::runtime::run_lite(&conv.bytes, "model.lite", &named).unwrap();
    out.remove(0).1
}

#[test]
fn mod_takes_the_divisors_sign() {
    let x = vec![-4, 7, 5, 4, -7, 8];
    let y = vec![2, -3, 8, -2, 3, 5];
    let int = |v: Vec<i32>| NpyArray {
        shape: vec![6],
        data: NpyData::I32(v),
    };
    let got = run(&modulo(0, 6), vec![("x", int(x)), ("y", int(y))]);
    assert_eq!(got.data, NpyData::I32(vec![0, -2, 5, 0, 2, 3]));

    let x = vec![-4.3f32, 7.2, 5.0, 4.3, -7.2, 8.0];
    let y = vec![2.1f32, -3.4, 8.0, -2.1, 3.4, 5.0];
    let got = run(
        &modulo(0, 1),
        vec![
            ("x", NpyArray::f32(vec![6], x.clone())),
            ("y", NpyArray::f32(vec![6], y.clone())),
        ],
    );
    // Python's `%` on the same float32 values.
    let want: Vec<f32> = x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| {
            let r = a % b;
            if r != 0.0 && (r < 0.0) != (b < 0.0) {
                r + b
            } else {
                r
            }
        })
        .collect();
    assert_eq!(got.to_f32(), want);
    assert!((want[0] - 2.0).abs() < 1e-5 && (want[1] + 3.0).abs() < 1e-5);
}

#[test]
fn fmod_is_folded_on_constants_and_refused_at_run_time() {
    let err = format!("{:#}", modulo(1, 1).import().unwrap_err());
    assert!(err.contains("'mod' (Mod): fmod=1"), "{err}");

    let mut b = B::new(13);
    b.input("x", &[3])
        .init(ftensor("a", &[3], vec![-4.5, 7.0, 5.0]))
        .init(ftensor("b", &[3], vec![2.0, -3.0, 8.0]))
        .init(itensor("c", &[3], vec![-7, 7, -7]))
        .init(itensor("d", &[3], vec![3, -3, -3]))
        .node("Mod", "fmod", &["a", "b"], &["r"], vec![("fmod", A::I(1))])
        .node("Mod", "imod", &["c", "d"], &["ir"], vec![("fmod", A::I(1))])
        .node("Cast", "cast", &["ir"], &["irf"], vec![("to", A::I(1))])
        .node("Add", "add", &["x", "r"], &["s"], vec![])
        .node("Add", "add2", &["s", "irf"], &["z"], vec![])
        .output("z");
    let got = run(&b, vec![("x", NpyArray::f32(vec![3], vec![0.0; 3]))]);
    // C's fmod: the dividend's sign (-0.5, 1, 5), and for integers (-1, 1, -1).
    assert_eq!(got.to_f32(), vec![-1.5, 2.0, 4.0]);
}
