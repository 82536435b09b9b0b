//! The seed side (`granary seed`): the garden → seed mirror and the extension controllers.
//! The decisions are pure functions ([`grace`], [`prefix`], [`etcd_secret`]); the controllers arrive with the seed-side
//! issue.

pub mod etcd_secret;
pub mod grace;
pub mod prefix;
