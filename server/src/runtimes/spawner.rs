//! Runtime children are forked from one thread that lives as long as roost.
//!
//! Linux sends a child's parent-death signal ([`super::pre_exec`]) when the *thread* that
//! forked it exits. A tokio task can run on a thread that exits while roost keeps running:
//! blocking-pool threads exit after sitting idle (10 s by default), and `block_in_place`
//! (roost's code does not call it, but a dependency may) hands the worker's scheduler to a
//! new thread and turns the old worker into a blocking-pool thread. A runtime forked there
//! would be SIGKILLed some seconds later for no reason. So every runtime is spawned by the
//! spawner thread: started by the first spawn and never stopped (its loop ends only when
//! every sender is dropped, and one sender lives in a static), it exits with the process.

use std::{
    io,
    sync::{Mutex, PoisonError, mpsc},
};

use tokio::{
    process::{Child, Command},
    runtime::Handle,
    sync::oneshot,
};

/// One spawn for the spawner thread.
struct Job {
    command: Command,
    /// The caller's runtime: the child's pipes and its reaping are registered with it.
    runtime: Handle,
    done: oneshot::Sender<io::Result<Child>>,
}

/// The spawner thread's queue, once it runs.
static SPAWNER: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);

/// Starts `command` from the spawner thread, set up to die with roost.
pub async fn spawn(mut command: Command) -> io::Result<Child> {
    super::pre_exec::die_with_roost(&mut command);
    let (done, spawned) = oneshot::channel();
    let job = Job { command, runtime: Handle::current(), done };
    let gone = || io::Error::other("the runtime spawner thread stopped");
    if spawner()?.send(job).is_err() {
        // It panicked: the next spawn starts a new one.
        *SPAWNER.lock().unwrap_or_else(PoisonError::into_inner) = None;
        return Err(gone());
    }
    spawned.await.map_err(|_| gone())?
}

/// The spawner thread's queue, starting the thread if it is not running yet.
fn spawner() -> io::Result<mpsc::Sender<Job>> {
    let mut spawner = SPAWNER.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(queue) = spawner.as_ref() {
        return Ok(queue.clone());
    }
    let (queue, jobs) = mpsc::channel::<Job>();
    std::thread::Builder::new().name("roost-spawner".to_owned()).spawn(move || {
        for Job { mut command, runtime, done } in jobs {
            let _context = runtime.enter();
            let _ = done.send(command.spawn());
        }
    })?;
    *spawner = Some(queue.clone());
    Ok(queue)
}
