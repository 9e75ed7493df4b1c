//! Following the client process `initialize.processId` names: LSP asks a server to exit when
//! that process is gone, even if something else keeps the daemon's input open (a shell that
//! started both, a wrapper that holds the pipe).
//!
//! The process is followed through a pidfd when the kernel has them (Linux 5.3): the runtime's
//! reactor wakes once, when the process ends, and a pid reused meanwhile cannot fool it. Else
//! `kill(pid, 0)` is asked every [`POLL_EVERY`], which a reused pid can fool (as it fools every
//! LSP server that polls); a zombie counts as alive there.

use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, PidfdFlags};
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// How often the process is looked at without a pidfd.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// Resolves once the process `pid` has ended (at once if there is no such process, or `pid` is
/// not a process id). A process the daemon may not signal (another user's) is alive.
pub async fn ended(pid: u32) {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        // Deprecated for types that merely expose a descriptor (one may be closed under the
        // reactor); an `OwnedFd` moved in is held, and closed, by the `AsyncFd` itself.
        #[allow(deprecated)]
        Ok(fd) => match AsyncFd::new(fd) {
            // Readable once the process has exited.
            Ok(fd) => {
                let _ = fd.readable().await;
                return;
            }
            Err(e) => tracing::debug!("cannot wait on the pidfd of {pid:?}: {e}"),
        },
        Err(rustix::io::Errno::SRCH) => return,
        Err(e) => tracing::debug!("no pidfd for {pid:?} ({e}): polling it"),
    }
    loop {
        if let Err(rustix::io::Errno::SRCH) = rustix::process::test_kill_process(pid) {
            return;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Follows `pid` on the runtime: when it ends, `gone` is notified (the transport then stops
/// reading and the daemon exits once what it read is answered).
pub fn follow(pid: u32, gone: Arc<Notify>) {
    tokio::spawn(async move {
        ended(pid).await;
        tracing::warn!("the client process {pid} (initialize.processId) ended: exiting");
        gone.notify_one();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_process_that_ends_is_seen_ending() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let waiting = tokio::spawn(ended(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished());
        child.kill().expect("kill");
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("seen ending")
            .expect("task");
        let _ = child.wait();
        // No such process (pid_max is below 2^22): at once.
        tokio::time::timeout(Duration::from_secs(1), ended(1 << 30))
            .await
            .expect("at once");
    }
}
