//! Seed isolation in the garden: Granary's SeedAuthorizer. A seed's garden identity
//! may touch only what is assigned to it — its buckets and entries, their credentials
//! Secrets, its liveness Lease — and may write into them only what a seed reports.
//!
//! [`decision`] (authorization) and [`admission`] (what a write may change) are pure
//! functions; [`review`] converts kube-apiserver's review objects to and from them;
//! [`server`] serves both over HTTPS from `granary garden`, reading its own caches.
//! [`identity`] says which users are seeds.

pub mod admission;
pub mod decision;
pub mod identity;
pub mod review;
pub mod server;

pub use decision::{
    Attributes, Decision, GardenView, Policy, Requirement, ResourceRequest, decide,
};
pub use server::{RunningWebhook, WebhookError};
