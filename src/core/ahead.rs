//! Work ahead on rayon's pool, results in order on the calling thread: the shape of the
//! parallel open (batches of lines parsed ahead of the tree that takes them) and of rendering
//! ahead (blocks of messages rendered ahead of the writer). Pure: no I/O of its own.

use std::collections::VecDeque;
use std::sync::mpsc;

/// How far [`in_order`] may run ahead of its consumer: at most `items` pieces of work in
/// flight and, while more than one is, at most `weight` of their summed weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Pieces of work in flight (at least one is always allowed).
    pub items: usize,
    /// Summed weight of the pieces in flight (bytes, say); a single piece may exceed it.
    pub weight: usize,
}

/// Whether [`in_order`] can run work on the pool from this thread: the pool has two threads or
/// more and this thread is not one of them (a pool thread waiting for the work it spawned could
/// wait for ever).
pub fn available() -> bool {
    rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none()
}

/// Takes pieces of work from `next` (with their weights, until it gives `None`), runs `work` on
/// each on rayon's pool within `limit`, and hands the results to `consume` in the order `next`
/// gave the pieces, on the calling thread. `next` and `consume` share `state`. Stops at the
/// first error of `next` or `consume` (the work in flight then finishes and is dropped).
/// Call it only where [`available`] is true; elsewhere it still works, but a pool thread
/// waiting on its own work can deadlock. A `work` that panics re-raises its panic here.
pub fn in_order<S, T, R, E>(
    state: &mut S,
    limit: Limit,
    mut next: impl FnMut(&mut S) -> Result<Option<(T, usize)>, E>,
    work: &(impl Fn(T) -> R + Sync),
    mut consume: impl FnMut(&mut S, R) -> Result<(), E>,
) -> Result<(), E>
where
    T: Send,
    R: Send,
{
    rayon::in_place_scope(|scope| {
        let mut ahead: VecDeque<(mpsc::Receiver<R>, usize)> = VecDeque::new();
        let mut weight = 0;
        let mut end = false;
        loop {
            while !end && (ahead.is_empty() || (ahead.len() < limit.items && weight < limit.weight))
            {
                let Some((piece, w)) = next(state)? else {
                    end = true;
                    break;
                };
                let (done, result) = mpsc::sync_channel(1);
                weight += w;
                ahead.push_back((result, w));
                scope.spawn(move |_| {
                    let _ = done.send(work(piece));
                });
            }
            let Some((result, w)) = ahead.pop_front() else {
                return Ok(());
            };
            // A piece whose work panicked sent nothing; the scope re-raises its panic.
            let Ok(result) = result.recv() else {
                return Ok(());
            };
            weight -= w;
            consume(state, result)?;
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Results come back in order whatever the limits, every piece once, and the first error
    /// of either side stops the run there.
    #[test]
    fn results_in_order_within_the_limit_and_stops_at_the_first_error() {
        crate::testdata::pool_of_several();
        for limit in [
            Limit {
                items: 1,
                weight: 1,
            },
            Limit {
                items: 3,
                weight: 10,
            },
            Limit {
                items: 64,
                weight: usize::MAX,
            },
        ] {
            let mut given = 0..200u32;
            let mut got = Vec::new();
            in_order(
                &mut got,
                limit,
                |_| Ok::<_, String>(given.next().map(|i| (i, (i % 7) as usize))),
                &|i: u32| {
                    // Later pieces finish first more often than not.
                    std::thread::sleep(std::time::Duration::from_micros(u64::from(200 - i)));
                    i * 2
                },
                |got, r| {
                    got.push(r);
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(
                got,
                (0..200).map(|i| i * 2).collect::<Vec<_>>(),
                "{limit:?}"
            );

            let mut given = 0..200u32;
            let mut seen = Vec::new();
            let stopped = in_order(
                &mut seen,
                limit,
                |_| Ok(given.next().map(|i| (i, 1))),
                &|i: u32| i,
                |seen, r| {
                    if r == 50 {
                        return Err(format!("stop at {r}"));
                    }
                    seen.push(r);
                    Ok(())
                },
            );
            assert_eq!(stopped, Err("stop at 50".to_owned()));
            assert_eq!(seen, (0..50).collect::<Vec<_>>());

            let mut given = 0..200u32;
            let stopped = in_order(
                &mut (),
                limit,
                |_| match given.next() {
                    Some(70) => Err("cannot read 70".to_owned()),
                    other => Ok(other.map(|i| (i, 1))),
                },
                &|i: u32| i,
                |_, r| {
                    assert!(r < 70);
                    Ok(())
                },
            );
            assert_eq!(stopped, Err("cannot read 70".to_owned()));
        }
    }
}
