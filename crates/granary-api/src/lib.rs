//! The API types of every group Granary serves or reads, with their defaults and
//! validation. Field names are exactly those of the upstream projects (Gardener, Velero,
//! OADP) so their YAML and tools work unchanged. Nothing here does I/O.
//!
//! - [`core`] (`core.gardener.cloud`), [`extensions`] (`extensions.gardener.cloud`),
//!   [`velero`] (`velero.io`) and [`oadp`] (`oadp.openshift.io`): the kinds, with
//!   [`common`] holding what several groups share;
//! - [`crds`]: the CustomResourceDefinitions generated from those types (`granary crds`);
//! - [`bucket_name`], [`names`] and [`rbac`]: bucket names valid at every provider,
//!   Kubernetes' name rules, and RBAC rule coverage as kube-apiserver decides it;
//! - [`lean`]: custom resources decoded without `metadata.managedFields`, for caches.

pub mod bucket_name;
pub mod common;
pub mod core;
pub mod crds;
pub mod extensions;
pub mod lean;
pub mod names;
pub mod oadp;
pub mod rbac;
pub mod velero;
