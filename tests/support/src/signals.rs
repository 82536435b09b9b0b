//! Processes and their leases: send a signal to a child, wait for it to exit (showing
//! its log when it does not), read who holds a Lease.

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;

use crate::DEADLINE;

pub fn send_signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {}", child.id());
}

/// Waits for the child to exit (killing it and failing after the deadline).
pub async fn wait_exit(child: &mut Child, log: &Path) -> ExitStatus {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().expect("child status") {
            return status;
        }
        if tokio::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the process did not exit:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The holder of Lease `namespace/name`, if any.
pub async fn lease_holder(client: &Client, namespace: &str, name: &str) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .expect("lease read")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}
