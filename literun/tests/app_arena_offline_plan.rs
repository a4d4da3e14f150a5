//! An application-supplied arena: `Model::arena_bytes` before any interpreter, and `invoke`
//! allocating nothing (a counting global allocator; this file is its own test binary).

mod common;

use common::{ModelBuilder, F};
use literun::schema::{self as s, BuiltinOperator as B};
use literun::{Interpreter, Model};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;
// Allocations by the current thread (tests run in parallel threads).
thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// FULLY_CONNECTED (through the fast kernel where the CPU has one), RELU, ADD.
fn model_bytes() -> literun::AlignedBytes {
    let mut m = ModelBuilder::new();
    let x = m.f32("x", &[2, 24]);
    let wv: Vec<f32> = (0..24 * 40)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
        .collect();
    let w = m.const_f32("w", &[40, 24], &wv);
    let b = m.const_f32("b", &[40], &[0.25; 40]);
    let y = m.f32("y", &[2, 40]);
    m.op(B::FULLY_CONNECTED, &[x, w, b], &[y], None);
    let z = m.f32("z", &[2, 40]);
    m.op(B::RELU, &[y], &[z], None);
    let c = m.const_f32("c", &[40], &[-0.5; 40]);
    let o = m.f32("o", &[2, 40]);
    m.op(
        B::ADD,
        &[z, c],
        &[o],
        common::opts(
            11,
            vec![F::I8(s::AddOptions::VT_FUSED_ACTIVATION_FUNCTION, 0)],
        ),
    );
    m.finish(&[x], &[o])
}

#[test]
fn app_arena_gives_the_same_results_and_invoke_allocates_nothing() {
    let bytes = model_bytes();
    let model = Model::from_bytes(&bytes).unwrap();
    let need = model.arena_bytes().unwrap();
    let input: Vec<f32> = (0..48).map(|i| (i as f32 - 20.0) / 7.0).collect();

    let mut own = Interpreter::new(&model).unwrap();
    assert_eq!(own.arena_bytes(), need);
    own.input_f32_mut(0).unwrap().copy_from_slice(&input);
    own.invoke().unwrap();
    let want = own.output(0).unwrap().as_f32().unwrap().to_vec();

    let mut storage = vec![0u128; need / 16 + 1];
    let arena: &mut [u8] = bytemuck::cast_slice_mut(&mut storage);
    let mut it = Interpreter::with_arena(&model, arena).unwrap();
    let before = ALLOCS.with(Cell::get);
    for _ in 0..2 {
        // The arena reuses the input's memory once it is consumed: write it before each run.
        it.input_f32_mut(0).unwrap().copy_from_slice(&input);
        it.invoke().unwrap();
    }
    let after = ALLOCS.with(Cell::get);
    assert_eq!(after, before, "invoke allocated");
    assert_eq!(it.output(0).unwrap().as_f32().unwrap(), &want[..]);
}

#[test]
fn app_arena_too_small_is_an_error_even_after_alignment() {
    let bytes = model_bytes();
    let model = Model::from_bytes(&bytes).unwrap();
    let need = model.arena_bytes().unwrap();
    let mut storage = vec![0u128; need / 16 + 1];
    {
        let arena: &mut [u8] = bytemuck::cast_slice_mut(&mut storage);
        assert!(Interpreter::with_arena(&model, &mut arena[..need - 16]).is_err());
    }
    let arena: &mut [u8] = bytemuck::cast_slice_mut(&mut storage);
    assert!(Interpreter::with_arena(&model, &mut arena[1..need + 1]).is_err());
}
