//! End-to-end tests, one module per scenario family, sharing `tests/support/`.

#[path = "../support/mod.rs"]
mod support;

#[path = "../support/seed.rs"]
mod seed_support;

#[path = "../support/etcd_sim.rs"]
mod etcd_sim;
#[path = "../support/proxy.rs"]
mod proxy;

// The providers' emulator finder/starter, shared rather than copied.
#[path = "../../providers/tests/support/emulators.rs"]
#[allow(dead_code)]
mod provider_emulators;

mod attack_entry_readopt;
mod attack_local_links;
mod attack_nonadmin_rbac;
mod attack_planted_backups;
mod attack_restore_items;
mod backup_runner;
mod backup_runner_world;
mod bench;
mod cli;
mod cli_backup;
mod cli_dry_run;
mod cli_location;
mod cli_restore;
mod conformance;
mod conformance_apply;
mod conformance_crd;
mod conformance_dry_run;
mod conformance_events;
mod conformance_identities;
mod conformance_metadata;
mod conformance_negotiation;
mod conformance_rbac;
mod deploy;
mod dev;
mod durability;
mod garden;
mod garden_placement;
mod kubectl;
mod kubectl_protobuf;
mod landscape_guards;
mod leader;
mod migrate;
mod migrate_garden;
mod migrate_world;
mod nonadmin;
mod nonadmin_locations;
mod restore_actions;
mod secret_hygiene;
mod seed;
mod seed_authz;
mod seed_crash;
mod seed_credentials;
mod seed_data_safety;
mod seed_grace;
mod seed_handover;
mod seed_outage;
mod velero_download;
mod velero_lifecycle;
mod velero_restore;
mod velero_schedules;
mod velero_server;
