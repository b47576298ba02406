//! A forked child (a DataLoader worker) can use the CPU path after the parent did: rayon's global
//! pool is inherited without its threads, so flce's CPU entry points build their own pool in the
//! child instead of handing work to threads that no longer exist.

use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{cpu, GradOutput, Options, Shape};

#[test]
fn the_cpu_path_works_in_a_forked_child() {
    let opts = Options::default();
    let p = RandomProblem::<f32>::new(Shape::new(300, 32, 2000), 1, DataKind::Planted, 0.1, &opts, false, false);
    // the parent uses its pools first, as a training process does before its workers fork
    let want = cpu::forward(&p.inputs(), &opts).unwrap();
    let want_grads = cpu::backward(&p.inputs(), &opts, &want.lse, GradOutput::Scalar(1.0)).unwrap();
    // SAFETY: the child only computes, compares and exits with _exit (no unwinding, no atexit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe { libc::alarm(60) }; // a hang becomes SIGALRM, not a stuck test
        let ok = std::panic::catch_unwind(|| {
            let got = cpu::forward(&p.inputs(), &opts).unwrap();
            let grads = cpu::backward(&p.inputs(), &opts, &got.lse, GradOutput::Scalar(1.0)).unwrap();
            got.loss.to_bits() == want.loss.to_bits() && grads.de == want_grads.de && grads.dc == want_grads.dc
        });
        unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 3 }) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status),
        "child did not exit normally (signal {}): a hang or a crash",
        libc::WTERMSIG(status)
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's results differ from the parent's");
}
