//! Serializes fixed arrays longer than serde's 32 as tuples (the
//! snapshot's large per-thread and per-SM arrays).

use core::fmt;
use core::marker::PhantomData;
use serde::de::{Error, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Serializes `a` as an `N`-tuple.
pub fn serialize<S: Serializer, T: Serialize, const N: usize>(
    a: &[T; N],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut t = s.serialize_tuple(N)?;
    for x in a {
        t.serialize_element(x)?;
    }
    t.end()
}

struct V<T, const N: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de> + Copy + Default, const N: usize> Visitor<'de> for V<T, N> {
    type Value = [T; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array of {N} elements")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<[T; N], A::Error> {
        let mut a = [T::default(); N];
        for (i, x) in a.iter_mut().enumerate() {
            *x = seq
                .next_element()?
                .ok_or_else(|| A::Error::invalid_length(i, &self))?;
        }
        Ok(a)
    }
}

/// Deserializes an `N`-tuple into an array.
pub fn deserialize<'de, D: Deserializer<'de>, T, const N: usize>(d: D) -> Result<[T; N], D::Error>
where
    T: Deserialize<'de> + Copy + Default,
{
    d.deserialize_tuple(N, V::<T, N>(PhantomData))
}
