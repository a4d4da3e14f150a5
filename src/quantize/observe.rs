//! Runs samples through a file on every core and hands the values of the op outputs a caller
//! wants (int8 and int16 dequantized) back in sample order, so what the caller accumulates is the
//! same with any number of threads.
//!
//! Each worker thread owns an interpreter and runs every `workers`-th sample; the caller's thread
//! takes the samples' values in order, one sample at a time, from a channel that holds at most
//! one finished sample per worker (memory stays bounded however many samples there are), and
//! hands the buffers back for the worker's next sample (fresh ones would be fresh pages).

use super::calibrate::{feed_input, keeps_state, Sample};
use anyhow::{anyhow, Result};
use std::sync::mpsc;

/// The observed values of one sample: (tensor index, values) in the order the ops wrote them.
type Observed = Vec<(usize, Vec<f32>)>;

/// Runs every sample through `bytes` and calls `f(sample, tensor index, float values)` for each
/// op output that `wanted(tensor index)` accepts and that holds float32, or int8 / int16 with
/// quantization parameters (dequantized), sample after sample in order.
pub(crate) fn observe_where(
    bytes: &[u8],
    samples: &[Sample],
    wanted: &(dyn Fn(usize) -> bool + Sync),
    mut f: impl FnMut(usize, usize, &[f32]),
) -> Result<()> {
    if samples.is_empty() {
        return Ok(());
    }
    let aligned = aligned(bytes);
    let model = literun::Model::from_bytes(&aligned).map_err(|e| anyhow!("{e}"))?;
    let workers = rayon::current_num_threads().clamp(1, samples.len());
    std::thread::scope(|scope| -> Result<()> {
        let mut results = Vec::with_capacity(workers);
        let mut spares = Vec::with_capacity(workers);
        for first in 0..workers {
            let (tx, rx) = mpsc::sync_channel::<Result<Observed>>(1);
            let (give_back, returned) = mpsc::channel::<Observed>();
            results.push(rx);
            spares.push(give_back);
            let model = &model;
            scope.spawn(move || run_every(model, samples, first, workers, wanted, &tx, &returned));
        }
        for k in 0..samples.len() {
            let observed = results[k % workers]
                .recv()
                .map_err(|_| anyhow!("a sample's run stopped without a result"))??;
            for (t, v) in &observed {
                f(k, *t, v);
            }
            // The worker may have finished: then the buffers are simply dropped.
            let _ = spares[k % workers].send(observed);
        }
        Ok(())
    })
}

/// A file's bytes where the model's buffers can be read: the bytes themselves where they start
/// 16-byte aligned (the allocator's large blocks do), else an aligned copy. Each measurement
/// reads a file this way, and ResNet18's float file is 45 MB: copying it every time (fresh
/// pages, then the copy) cost more than some of the runs.
pub(crate) enum Aligned<'a> {
    InPlace(&'a [u8]),
    Copied(literun::AlignedBytes),
}

impl std::ops::Deref for Aligned<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Aligned::InPlace(b) => b,
            Aligned::Copied(b) => b,
        }
    }
}

/// `bytes` as [`Aligned`] bytes.
pub(crate) fn aligned(bytes: &[u8]) -> Aligned<'_> {
    if bytes.as_ptr().align_offset(16) == 0 {
        Aligned::InPlace(bytes)
    } else {
        Aligned::Copied(literun::AlignedBytes::from_slice(bytes))
    }
}

/// Runs samples `first`, `first + step`, ... and sends each one's observed values, stopping at
/// the first error or when nobody listens any more.
fn run_every(
    model: &literun::Model<'_>,
    samples: &[Sample],
    first: usize,
    step: usize,
    wanted: &(dyn Fn(usize) -> bool + Sync),
    tx: &mpsc::SyncSender<Result<Observed>>,
    returned: &mpsc::Receiver<Observed>,
) {
    let stateful = keeps_state(model);
    let mut interp: Option<literun::Interpreter<'_>> = None;
    for sample in samples.iter().skip(first).step_by(step) {
        let spare = returned.try_recv().unwrap_or_default();
        let result = (|| -> Result<Observed> {
            // Each sample from zero state, as the ONNX model runs it.
            if interp.is_none() || stateful {
                interp = Some(literun::Interpreter::new(model).map_err(|e| anyhow!("{e}"))?);
            }
            let interp = interp.as_mut().expect("created above");
            run_sample(model, interp, sample, wanted, spare)
        })();
        let failed = result.is_err();
        if tx.send(result).is_err() || failed {
            return;
        }
    }
}

fn run_sample(
    model: &literun::Model<'_>,
    interp: &mut literun::Interpreter<'_>,
    sample: &Sample,
    wanted: &(dyn Fn(usize) -> bool + Sync),
    spare: Observed,
) -> Result<Observed> {
    for (i, values) in sample.iter().enumerate() {
        feed_input(model, interp, i, values)?;
    }
    let tensors = model.tensors();
    // The previous sample's buffers, in the order its tensors came (the same order as now).
    let mut spare = spare.into_iter().rev().map(|(_, v)| v).collect::<Vec<_>>();
    let mut observed = Vec::new();
    interp
        .invoke_observed(&mut |_op, t, view| {
            if !wanted(t) {
                return;
            }
            let mut values = spare.pop().unwrap_or_default();
            float_values(tensors[t].qparams.as_ref(), &view, &mut values);
            if values.is_empty() {
                spare.push(values);
            } else {
                observed.push((t, values));
            }
        })
        .map_err(|e| anyhow!("{e}"))?;
    Ok(observed)
}

/// Replaces `values` with the tensor values in `view` as float: float32 as they are, int8 and
/// int16 with quantization parameters (`qparams`) dequantized; left empty for other tensors.
pub(crate) fn float_values(
    qparams: Option<&literun::QuantParams<'_>>,
    view: &literun::TensorRef<'_>,
    values: &mut Vec<f32>,
) {
    values.clear();
    match view.dtype() {
        literun::DType::F32 => values.extend_from_slice(view.as_f32().unwrap_or(&[])),
        literun::DType::I8 => {
            if let Some(q) = qparams {
                let (s, z) = q.channel(0);
                let table: Vec<f32> = (0..=255u8)
                    .map(|b| (b as i8 as i64 - z) as f32 * s)
                    .collect();
                values.extend(view.bytes().iter().map(|&b| table[b as usize]));
            }
        }
        literun::DType::I16 => {
            if let Some(q) = qparams {
                let (s, z) = q.channel(0);
                values.extend(
                    crate::runtime::i16_values(view.bytes())
                        .iter()
                        .map(|&v| (i64::from(v) - z) as f32 * s),
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Aligned bytes are read in place, others copied to aligned memory; both read the same.
    #[test]
    fn aligned_bytes_are_read_in_place_and_others_copied() {
        let words = vec![0x0123_4567_89ab_cdef_u128; 4];
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let whole = aligned(bytes);
        assert!(matches!(whole, Aligned::InPlace(_)));
        assert_eq!(whole.as_ptr(), bytes.as_ptr());
        let shifted = aligned(&bytes[1..]);
        assert!(matches!(shifted, Aligned::Copied(_)));
        assert_eq!(shifted.as_ptr().align_offset(16), 0);
        assert_eq!(&*shifted, &bytes[1..]);
    }
}
