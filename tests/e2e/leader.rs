//! Leader election (`runtime::leader`) against an API server: of two candidates one
//! leads; when the leader dies without releasing, the other takes over once the lease
//! has expired; a leader that shuts down releases the lease at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use granary::runtime::clock::Clock;
use granary::runtime::leader::{ElectionSettings, run_as_leader};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use crate::support::{TestCluster, poll_until};

/// Counts who is working: `leading[i]` is 1 while candidate `i` runs its work.
struct Witness {
    leading: [AtomicUsize; 2],
}

impl Witness {
    fn leaders(&self) -> usize {
        self.leading.iter().map(|l| l.load(Ordering::SeqCst)).sum()
    }
}

struct Working(Arc<Witness>, usize);

impl Drop for Working {
    fn drop(&mut self) {
        self.0.leading[self.1].fetch_sub(1, Ordering::SeqCst);
    }
}

fn candidate(
    tc: &TestCluster,
    lease: &str,
    i: usize,
    witness: Arc<Witness>,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let api: Api<Lease> = Api::namespaced(tc.client(), "default");
    let settings = ElectionSettings {
        lease_name: lease.to_string(),
        identity: format!("candidate-{i}"),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        labels: BTreeMap::from([tc.instance_label()]),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let work = move || {
            let witness = witness.clone();
            async move {
                witness.leading[i].fetch_add(1, Ordering::SeqCst);
                let _working = Working(witness, i);
                std::future::pending::<()>().await;
            }
        };
        run_as_leader(api, settings, Clock::system(), work, async {
            let _ = rx.await;
        })
        .await
        .expect("leader election runs");
    });
    (task, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_candidate_leads_and_the_other_takes_over_when_it_dies() {
    let tc = TestCluster::start().await;
    let lease = tc.name("leader");
    let witness = Arc::new(Witness {
        leading: [AtomicUsize::new(0), AtomicUsize::new(0)],
    });
    let (first, _stop_first) = candidate(&tc, &lease, 0, witness.clone());
    poll_until("candidate 0 leads", || async {
        witness.leading[0].load(Ordering::SeqCst) == 1
    })
    .await;
    let (second, stop_second) = candidate(&tc, &lease, 1, witness.clone());
    // The second stands by while the first renews (several retry periods).
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(witness.leaders(), 1, "exactly one leader");
        assert_eq!(witness.leading[1].load(Ordering::SeqCst), 0);
    }
    // The leader dies without releasing the lease (aborted like a crashed process).
    let died = tokio::time::Instant::now();
    first.abort();
    let _ = first.await;
    poll_until("candidate 1 takes over", || async {
        witness.leading[1].load(Ordering::SeqCst) == 1
    })
    .await;
    let took = died.elapsed();
    assert!(
        took <= Duration::from_millis(2000 + 2 * 200 + 500),
        "take-over within the lease duration (plus a retry): {took:?}"
    );
    assert_eq!(witness.leaders(), 1);
    let held = Api::<Lease>::namespaced(tc.client(), "default")
        .get(&lease)
        .await
        .expect("lease");
    let spec = held.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("candidate-1"));
    assert!(spec.lease_transitions.unwrap_or(0) >= 1);

    // A leader that shuts down releases the lease.
    let _ = stop_second.send(());
    second.await.expect("clean shutdown");
    let released = Api::<Lease>::namespaced(tc.client(), "default")
        .get(&lease)
        .await
        .expect("lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(released, None);
    assert_eq!(witness.leaders(), 0);
}
