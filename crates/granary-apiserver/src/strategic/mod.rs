//! Strategic merge patch (placeholder while being written).

mod meta;

#[cfg(test)]
mod tests;
