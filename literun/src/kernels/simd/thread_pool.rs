//! A persistent pool of worker threads (feature `threads`) that runs one operator's row blocks.
//!
//! The workers start once, with the first operator big enough to split, and live as long as
//! the interpreter. Between jobs a worker spins for a short while (the next operator usually
//! follows within microseconds) and then parks on a condition variable, so an idle
//! interpreter costs no CPU. A job is a borrowed closure `f(task)` over a few tasks (one
//! block of rows each). The calling thread and the workers claim the tasks one at a time, the
//! calling thread first: a worker that wakes late (parked, or its core busy with another
//! process) finds its block already done by the calling thread instead of holding it up, so a
//! split operator is not much slower than on one thread even on a loaded machine. Which
//! thread runs a block does not change its numbers. [`Pool::run`] returns only when every
//! task has finished, so the closure may borrow from the caller's stack. A panic in a task is
//! caught and raised again on the calling thread once all tasks are done.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicUsize, Ordering};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker polls for the next job before it parks, and how long the calling thread
/// polls for the workers to finish before it sleeps: longer than the gap between two
/// operators of one invoke, far shorter than the gap between invokes of a paced application.
const SPIN: Duration = Duration::from_micros(50);

/// How long of [`SPIN`] is polled without yielding the core.
const SPIN_ALONE: Duration = Duration::from_micros(5);

/// A job's closure with its borrow's lifetime erased (see [`Pool::run`]).
type Job = &'static (dyn Fn(usize) + Sync);

/// What the calling thread and the workers share.
struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is published or the pool shuts down.
    wake: Condvar,
    /// Signalled when the last task of a job finishes while the calling thread sleeps.
    done: Condvar,
    /// [`State::epoch`], readable without the lock by spinning workers.
    epoch: AtomicUsize,
    /// Tasks of the current job not finished yet.
    pending: AtomicUsize,
}

struct State {
    /// Counts published jobs.
    epoch: usize,
    /// The current job; `None` outside [`Pool::run`].
    job: Option<Job>,
    /// Tasks of the current job.
    tasks: usize,
    /// The next task of the current job nobody has claimed.
    next: usize,
    /// The first panic of a task of the current job.
    panic: Option<Box<dyn Any + Send>>,
    shutdown: bool,
    /// Workers asleep on `wake`.
    parked: usize,
    /// Whether the calling thread sleeps on `done`.
    caller_parked: bool,
}

impl State {
    /// Claims the next task of job `epoch`, if that job is still the current one and has one.
    fn claim(&mut self, epoch: usize) -> Option<(Job, usize)> {
        let job = self
            .job
            .filter(|_| self.epoch == epoch && self.next < self.tasks)?;
        self.next += 1;
        Some((job, self.next - 1))
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // No code that can panic runs under the lock; a poisoned lock still holds a valid state.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Polls `ready` for at most [`SPIN`]; whether it became true. Between polls a CPU pause, and
/// after the first [`SPIN_ALONE`] also a yield to the OS: if the thread that will make `ready`
/// true shares this core (the other cores busy with other processes), it runs at once instead
/// of after this thread's time slice or spin.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            core::hint::spin_loop();
        }
        let spun = start.elapsed();
        if spun >= SPIN {
            return ready();
        }
        if spun >= SPIN_ALONE {
            std::thread::yield_now();
        }
    }
}

/// Runs task `t` of a job, catches its panic (kept for the calling thread) and counts it as
/// finished. The job's closure must not be used after this returns: the last task's end lets
/// [`Pool::run`] return.
fn run_task(sh: &Shared, f: &(dyn Fn(usize) + Sync), t: usize) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| f(t))) {
        lock(&sh.state).panic.get_or_insert(payload);
    }
    if sh.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        let st = lock(&sh.state);
        if st.caller_parked {
            sh.done.notify_one();
        }
    }
}

/// Persistent worker threads; see the module documentation.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl core::fmt::Debug for Pool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pool")
            .field("workers", &self.threads.len())
            .finish()
    }
}

impl Pool {
    /// A pool of up to `workers` threads besides the calling one (fewer if the system refuses
    /// to start more; [`workers`](Self::workers) says how many started).
    pub(crate) fn new(workers: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                epoch: 0,
                job: None,
                tasks: 0,
                next: 0,
                panic: None,
                shutdown: false,
                parked: 0,
                caller_parked: false,
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
            epoch: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
        });
        let mut threads = Vec::with_capacity(workers);
        for w in 0..workers {
            let s = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(alloc::format!("literun-{}", w + 1))
                .spawn(move || work(&s));
            match spawned {
                Ok(t) => threads.push(t),
                Err(_) => break,
            }
        }
        Pool { shared, threads }
    }

    /// Worker threads running (the calling thread not counted).
    pub(crate) fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Runs `f(0)`, …, `f(tasks - 1)` on the calling thread and the workers, each once, and
    /// returns when all have finished. If a task panicked, panics with its payload after all
    /// have finished.
    pub(crate) fn run(&mut self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if tasks <= 1 || self.threads.is_empty() {
            (0..tasks).for_each(f);
            return;
        }
        let sh = &*self.shared;
        // SAFETY: only the lifetime changes (same fat-pointer layout). The erased reference is
        // handed out only by `State::claim`, only while this call runs: every claimed task
        // counts in `pending` until `run_task` has finished calling it, this call waits for
        // `pending` to reach 0 before it returns (no task's panic escapes before that:
        // `run_task` catches them), and it withdraws the job (`State::job = None`) first.
        // A claim of a later job checks the epoch, so a late worker cannot claim a task of
        // this job afterwards.
        let job: Job = unsafe { core::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
        sh.pending.store(tasks, Ordering::Relaxed);
        let epoch = {
            let mut st = lock(&sh.state);
            st.job = Some(job);
            st.tasks = tasks;
            st.next = 0;
            st.epoch = st.epoch.wrapping_add(1);
            sh.epoch.store(st.epoch, Ordering::Release);
            if st.parked > 0 {
                sh.wake.notify_all();
            }
            st.epoch
        };
        loop {
            let claimed = lock(&sh.state).claim(epoch);
            let Some((_, t)) = claimed else { break };
            run_task(sh, f, t);
        }
        let finished = || sh.pending.load(Ordering::Acquire) == 0;
        let spun = spin_until(finished);
        let panic = {
            let mut st = lock(&sh.state);
            if !spun {
                while !finished() {
                    st.caller_parked = true;
                    st = sh.done.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
                st.caller_parked = false;
            }
            st.job = None;
            st.panic.take()
        };
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        {
            let mut st = lock(&self.shared.state);
            st.shutdown = true;
            st.epoch = st.epoch.wrapping_add(1);
            self.shared.epoch.store(st.epoch, Ordering::Release);
            self.shared.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            // Tasks' panics are caught, so joining only fails if the thread itself died,
            // which leaves nothing to clean up.
            let _ = t.join();
        }
    }
}

/// A worker's loop: wait for a job, run the tasks it can claim, repeat until shutdown.
fn work(sh: &Shared) {
    let mut seen = 0;
    loop {
        spin_until(|| sh.epoch.load(Ordering::Acquire) != seen);
        let mut claimed = {
            let mut st = lock(&sh.state);
            while st.epoch == seen && !st.shutdown {
                st.parked += 1;
                st = sh.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                st.parked -= 1;
            }
            if st.shutdown {
                return;
            }
            seen = st.epoch;
            st.claim(seen)
        };
        while let Some((f, t)) = claimed {
            run_task(sh, f, t);
            claimed = lock(&sh.state).claim(seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn runs_every_task_once_across_many_jobs() {
        let mut pool = Pool::new(3);
        assert_eq!(pool.workers(), 3);
        for round in 0..2000 {
            let tasks = 1 + round % 4;
            let hits: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            pool.run(tasks, &|t| {
                hits[t].fetch_add(1, Ordering::Relaxed);
            });
            for (t, h) in hits.iter().enumerate() {
                assert_eq!(h.load(Ordering::Relaxed), usize::from(t < tasks), "{round}");
            }
        }
    }

    #[test]
    fn jobs_after_the_workers_parked() {
        let mut pool = Pool::new(2);
        for _ in 0..3 {
            let mut out = vec![0usize; 3];
            let slots: Vec<Mutex<&mut usize>> = out.iter_mut().map(Mutex::new).collect();
            pool.run(3, &|t| **slots[t].lock().unwrap() = t + 10);
            drop(slots);
            assert_eq!(out, [10, 11, 12]);
            std::thread::sleep(SPIN * 4);
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_still_works() {
        let mut pool = Pool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(3, &|t| {
                if t == 2 {
                    panic!("task 2 fails");
                }
            })
        }));
        assert!(r.is_err());
        let hits = AtomicUsize::new(0);
        pool.run(3, &|_| {
            hits.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_panic_waits_for_the_other_tasks() {
        let mut pool = Pool::new(1);
        let done = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(2, &|t| {
                std::thread::sleep(SPIN * 4);
                done.fetch_add(1, Ordering::Relaxed);
                if t == 0 {
                    panic!("task 0 fails");
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 2, "returned too early");
    }

    /// Each task waits until all have started: only finishes if the workers run them.
    #[test]
    fn tasks_run_on_the_workers_at_the_same_time() {
        let mut pool = Pool::new(2);
        let started = AtomicUsize::new(0);
        pool.run(3, &|_| {
            started.fetch_add(1, Ordering::SeqCst);
            let t0 = Instant::now();
            while started.load(Ordering::SeqCst) < 3 {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "a worker never came"
                );
                std::thread::yield_now();
            }
        });
    }

    #[test]
    fn several_pools_at_once_and_drop() {
        std::thread::scope(|s| {
            for p in 0..3 {
                s.spawn(move || {
                    let mut pool = Pool::new(2);
                    let sum = AtomicUsize::new(0);
                    for _ in 0..500 {
                        pool.run(3, &|t| {
                            sum.fetch_add(t + p, Ordering::Relaxed);
                        });
                    }
                    assert_eq!(sum.load(Ordering::Relaxed), 500 * (3 + 3 * p));
                });
            }
        });
    }
}
