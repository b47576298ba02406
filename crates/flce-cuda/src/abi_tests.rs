//! The ABI's checks: every C field the size of its Rust field, the generated header, the constants.

use super::*;

/// Size in bytes of a C type used in abi.rs's declarations.
fn c_size(c_type: &str) -> Option<usize> {
    if c_type.ends_with('*') {
        return Some(8);
    }
    match c_type {
        "int" | "float" => Some(4),
        "long long" | "unsigned long long" => Some(8),
        "TensorMap" => Some(std::mem::size_of::<TensorMap>()),
        _ => declarations().into_iter().find(|(name, ..)| *name == c_type).map(|(_, size, _)| size),
    }
}

#[test]
fn every_c_type_has_the_size_of_its_rust_field() {
    for (name, _, fields) in declarations() {
        for (c_type, field, rust_size) in fields {
            assert_eq!(c_size(c_type), Some(rust_size), "{name}.{field}: {c_type}");
        }
    }
}

#[test]
fn header_declares_every_struct_once_with_its_size() {
    let h = c_header();
    assert_eq!(h.matches("struct LossConstants {").count(), 1);
    assert!(h.contains(&format!("sizeof(GradTilesParams) == {}", std::mem::size_of::<GradTilesParams>())));
    assert!(c_config(DType::F16).contains("#define FLCE_DTYPE 1\n"));
    assert!(h.find("struct __align__(64) TensorMap").unwrap() < h.find("struct Sm90ForwardParams").unwrap());
    assert_eq!(std::mem::align_of::<Sm90ForwardParams>(), 64);
    assert_eq!(std::mem::size_of::<TensorMap>(), 128);
}

#[test]
fn constants_carry_the_options_and_sentinels_only_here() {
    let opts = Options { softcap: Some(30.0), shift: Some(64), reduction: Reduction::None, ..Options::default() };
    let k = LossConstants::new(Shape::new(128, 8, 1000), &opts);
    assert_eq!((k.n, k.d, k.v, k.reduction, k.shift, k.softcap, k.ignore_index), (128, 8, 1000, 2, 64, 30.0, -100));
    let plain = LossConstants::new(Shape::new(1, 1, 1), &Options::default());
    assert_eq!((plain.softcap, plain.shift, plain.reduction), (0.0, 0, 0));
}
