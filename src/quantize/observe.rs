//! Runs samples through a file on every core and hands the values of the op outputs a caller
//! wants (int8 and int16 dequantized) back in sample order, so what the caller accumulates is the
//! same with any number of threads.
//!
//! Each worker thread owns an interpreter (one per file where each sample runs through several)
//! and runs every `workers`-th sample; the caller's thread takes the samples' values in order,
//! one sample at a time, from a channel that holds at most one finished sample per worker
//! (memory stays bounded however many samples there are), and hands the buffers back for the
//! worker's next sample (fresh ones would be fresh pages).

use super::calibrate::{feed_input, keeps_state, Sample};
use anyhow::{anyhow, Result};
use std::sync::mpsc;

/// The observed values of one sample in one file: (tensor index, values) in the order the ops
/// wrote them.
type Observed = Vec<(usize, Vec<f32>)>;

/// Which tensors (by index) of a file a caller wants.
pub(crate) type Wanted<'w> = &'w (dyn Fn(usize) -> bool + Sync);

/// Runs every sample through `bytes` and calls `f(sample, tensor index, float values)` for each
/// op output that `wanted(tensor index)` accepts and that holds float32, or int8 / int16 with
/// quantization parameters (dequantized), sample after sample in order.
pub(crate) fn observe_where(
    bytes: &[u8],
    samples: &[Sample],
    wanted: &(dyn Fn(usize) -> bool + Sync),
    mut f: impl FnMut(usize, usize, &[f32]),
) -> Result<()> {
    observe_files_where(&[(bytes, wanted)], samples, |k, _, t, v| f(k, t, v))
}

/// [`observe_where`] for several files on the same samples: each sample runs through every file
/// in turn on one worker, which keeps one interpreter per file for all its samples (preparing an
/// interpreter packs the file's weights), and `f(sample, file, tensor index, values)` sees each
/// sample's values file after file, in sample order.
pub(crate) fn observe_files_where(
    files: &[(&[u8], Wanted<'_>)],
    samples: &[Sample],
    f: impl FnMut(usize, usize, usize, &[f32]),
) -> Result<()> {
    let files: Vec<(File<'_, '_>, Wanted<'_>)> =
        files.iter().map(|&(b, w)| (File::Bytes(b), w)).collect();
    observe_files(&files, samples, f)
}

/// [`observe_where`] on a file whose interpreters are kept between measurements.
pub(crate) fn observe_kept_where(
    kept: &KeptInterpreters<'_>,
    samples: &[Sample],
    wanted: Wanted<'_>,
    mut f: impl FnMut(usize, usize, &[f32]),
) -> Result<()> {
    observe_files(&[(File::Kept(kept), wanted)], samples, |k, _, t, v| {
        f(k, t, v)
    })
}

/// A file to run samples through: its bytes (its interpreters prepared for this measurement),
/// or interpreters kept for several.
#[derive(Clone, Copy)]
pub(crate) enum File<'f, 'k> {
    Bytes(&'f [u8]),
    Kept(&'f KeptInterpreters<'k>),
}

/// Prepared interpreters of one file, kept for every measurement that runs it: preparing one
/// packs every weight of the file (45 MB of float weights for ResNet18), and the float file is
/// run by calibration, weight rounding and the report. An interpreter taken and given back
/// keeps nothing of its last sample but for a model with state, which gets a fresh one.
pub struct KeptInterpreters<'m> {
    model: &'m literun::Model<'m>,
    stateful: bool,
    spare: std::sync::Mutex<Vec<literun::Interpreter<'m>>>,
}

impl<'m> KeptInterpreters<'m> {
    pub(crate) fn new(model: &'m literun::Model<'m>) -> KeptInterpreters<'m> {
        KeptInterpreters {
            model,
            stateful: keeps_state(model),
            spare: Default::default(),
        }
    }

    pub(crate) fn model(&self) -> &'m literun::Model<'m> {
        self.model
    }

    /// A kept interpreter, or a new one where none is spare (always for a model with state:
    /// each sample from zero state, as the ONNX model runs it).
    pub(crate) fn take(&self) -> Result<literun::Interpreter<'m>> {
        let spare = match self.stateful {
            true => None,
            false => self.spare.lock().expect("not poisoned").pop(),
        };
        match spare {
            Some(interp) => Ok(interp),
            None => literun::Interpreter::new(self.model).map_err(|e| anyhow!("{e}")),
        }
    }

    pub(crate) fn give_back(&self, interp: literun::Interpreter<'m>) {
        if !self.stateful {
            self.spare.lock().expect("not poisoned").push(interp);
        }
    }
}

/// [`observe_files_where`] over files of either kind.
pub(crate) fn observe_files(
    files: &[(File<'_, '_>, Wanted<'_>)],
    samples: &[Sample],
    mut f: impl FnMut(usize, usize, usize, &[f32]),
) -> Result<()> {
    if samples.is_empty() || files.is_empty() {
        return Ok(());
    }
    let aligned: Vec<Option<Aligned<'_>>> = files
        .iter()
        .map(|(file, _)| match *file {
            File::Bytes(b) => Some(aligned(b)),
            File::Kept(_) => None,
        })
        .collect();
    let models = aligned
        .iter()
        .map(|a| {
            a.as_deref()
                .map(|a| literun::Model::from_bytes(a).map_err(|e| anyhow!("{e}")))
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    let wanted: Vec<_> = files.iter().map(|&(_, w)| w).collect();
    let workers = rayon::current_num_threads().clamp(1, samples.len());
    std::thread::scope(|scope| -> Result<()> {
        let mut results = Vec::with_capacity(workers);
        let mut spares = Vec::with_capacity(workers);
        for first in 0..workers {
            let (tx, rx) = mpsc::sync_channel::<Result<Vec<Observed>>>(1);
            let (give_back, returned) = mpsc::channel::<Vec<Observed>>();
            results.push(rx);
            spares.push(give_back);
            let runners: Vec<Runner<'_, '_>> = files
                .iter()
                .zip(&models)
                .map(|((file, _), model)| match (*file, model) {
                    (File::Kept(kept), _) => Runner::Kept(kept, None),
                    (File::Bytes(_), Some(model)) => Runner::Fresh {
                        model,
                        stateful: keeps_state(model),
                        interp: None,
                    },
                    (File::Bytes(_), None) => unreachable!("every file of bytes has a model"),
                })
                .collect();
            let wanted = &wanted;
            scope
                .spawn(move || run_every(runners, samples, first, workers, wanted, &tx, &returned));
        }
        for k in 0..samples.len() {
            let observed = results[k % workers]
                .recv()
                .map_err(|_| anyhow!("a sample's run stopped without a result"))??;
            for (m, file) in observed.iter().enumerate() {
                for (t, v) in file {
                    f(k, m, *t, v);
                }
            }
            // The worker may have finished: then the buffers are simply dropped.
            let _ = spares[k % workers].send(observed);
        }
        Ok(())
    })
}

/// One worker's interpreter of one file: prepared for this measurement (a new one for each
/// sample of a model with state), or taken from those kept (and given back when the worker is
/// done).
enum Runner<'a, 'k> {
    Fresh {
        model: &'a literun::Model<'a>,
        stateful: bool,
        interp: Option<literun::Interpreter<'a>>,
    },
    Kept(&'a KeptInterpreters<'k>, Option<literun::Interpreter<'k>>),
}

impl Runner<'_, '_> {
    fn run(&mut self, sample: &Sample, wanted: Wanted<'_>, spare: Observed) -> Result<Observed> {
        match self {
            Runner::Fresh {
                model,
                stateful,
                interp,
            } => {
                // Each sample from zero state, as the ONNX model runs it.
                if interp.is_none() || *stateful {
                    *interp = Some(literun::Interpreter::new(model).map_err(|e| anyhow!("{e}"))?);
                }
                let interp = interp.as_mut().expect("created above");
                run_sample(model, interp, sample, wanted, spare)
            }
            Runner::Kept(kept, interp) => {
                if interp.is_none() || kept.stateful {
                    *interp = Some(kept.take()?);
                }
                let interp = interp.as_mut().expect("taken above");
                run_sample(kept.model, interp, sample, wanted, spare)
            }
        }
    }

    fn finish(self) {
        if let Runner::Kept(kept, Some(interp)) = self {
            kept.give_back(interp);
        }
    }
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

/// Runs samples `first`, `first + step`, ... through every file and sends each one's observed
/// values (per file), stopping at the first error or when nobody listens any more.
fn run_every(
    mut runners: Vec<Runner<'_, '_>>,
    samples: &[Sample],
    first: usize,
    step: usize,
    wanted: &[Wanted<'_>],
    tx: &mpsc::SyncSender<Result<Vec<Observed>>>,
    returned: &mpsc::Receiver<Vec<Observed>>,
) {
    for sample in samples.iter().skip(first).step_by(step) {
        let mut spares = returned.try_recv().unwrap_or_default().into_iter();
        let result = (|| -> Result<Vec<Observed>> {
            let mut all = Vec::with_capacity(runners.len());
            for (m, runner) in runners.iter_mut().enumerate() {
                all.push(runner.run(sample, wanted[m], spares.next().unwrap_or_default())?);
            }
            Ok(all)
        })();
        let failed = result.is_err();
        if tx.send(result).is_err() || failed {
            break;
        }
    }
    for runner in runners {
        runner.finish();
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

    /// A file run on kept interpreters gives the values a run of its bytes gives, and its
    /// interpreters (one per worker) are kept for the next measurement rather than prepared again.
    #[test]
    fn kept_interpreters_give_the_values_of_fresh_ones_and_stay_kept() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/literun/examples/models/mobilenetv2_block.lite"
        );
        let bytes = literun::AlignedBytes::from_slice(&std::fs::read(path).unwrap());
        let model = literun::Model::from_bytes(&bytes).unwrap();
        let len = model.inputs()[0].shape.iter().product::<usize>();
        let samples: Vec<Sample> = (0..5)
            .map(|k| {
                vec![(0..len)
                    .map(|i| ((i * 13 + k * 71) % 97) as f32 / 48.0 - 1.0)
                    .collect()]
            })
            .collect();
        let all = |_: usize| true;
        let mut fresh = Vec::new();
        observe_where(&bytes, &samples, &all, |k, t, v| {
            fresh.push((k, t, v.to_vec()))
        })
        .unwrap();
        let kept = KeptInterpreters::new(&model);
        for _ in 0..2 {
            let mut seen = Vec::new();
            observe_kept_where(&kept, &samples, &all, |k, t, v| {
                seen.push((k, t, v.to_vec()))
            })
            .unwrap();
            assert!(seen == fresh);
            let workers = rayon::current_num_threads().clamp(1, samples.len());
            assert_eq!(kept.spare.lock().unwrap().len(), workers);
        }
    }

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
