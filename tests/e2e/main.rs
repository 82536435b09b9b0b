//! End-to-end tests, one module per scenario family, sharing `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod conformance;
mod conformance_crd;
mod durability;
mod garden;
mod garden_placement;
mod kubectl;
mod leader;
