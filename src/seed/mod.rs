//! The seed side (`granary seed`): the garden → seed mirror and the extension controllers.
//! The decisions are pure functions ([`grace`]); the controllers arrive with the seed-side
//! issue.

pub mod grace;
