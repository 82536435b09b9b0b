//! The garden side (`granary garden`): CloudProfile backup pools, bucket shards, entry
//! placement with quota sharding, and bucket → seed assignment. The decisions are pure
//! functions over plain data ([`pools`], [`placement`], [`assignment`]); the controllers
//! that fetch, decide and apply arrive with the garden-side issue.

pub mod assignment;
pub mod placement;
pub mod pools;
