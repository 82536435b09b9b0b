use super::*;

#[test]
fn crds_are_structural() {
    for crd in crds() {
        assert_structural(&crd);
    }
}

#[test]
fn dump() {
    for crd in crds() {
        println!("{}", serde_json::to_string_pretty(&crd).unwrap());
    }
}
