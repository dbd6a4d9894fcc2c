//! The two-spirals example trains: its loss falls at least 10x.

#[path = "../../examples/two_spirals.rs"]
mod two_spirals;

#[test]
fn mlp_on_two_spirals_cuts_loss_tenfold() {
    let (first, last) = two_spirals::train(crate::common::gpu(), 1500, 0).unwrap();
    assert!(last * 10.0 <= first, "loss {first} -> {last}");
}
