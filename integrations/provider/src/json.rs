//! Reading JSON replies without keeping more than is used.
//!
//! # Invariants
//!
//! - [`Count`] reads a list one element at a time and drops each: counting a flood of tool calls
//!   costs the memory of one element, not of the list, so a reply can be measured against its
//!   bounds before it is parsed.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};

/// Whether one element of a list counts.
pub trait Counted<'de>: Deserialize<'de> {
    /// Whether this element counts.
    fn counts(&self) -> bool;
}

/// Every element counts (its content is skipped unread).
impl Counted<'_> for IgnoredAny {
    fn counts(&self) -> bool {
        true
    }
}

/// The number of elements of a JSON list that count (`null` or absent: 0), read without keeping
/// any of them.
///
/// ```
/// use loopbound_provider::json::Count;
/// use serde::de::IgnoredAny;
///
/// let count: Count<IgnoredAny> = serde_json::from_str(r#"[{"a": 1}, 2, [3]]"#)?;
/// assert_eq!(count.get(), 3);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub struct Count<T> {
    count: usize,
    element: PhantomData<T>,
}

impl<T> Count<T> {
    /// How many elements counted.
    #[must_use]
    pub fn get(&self) -> usize {
        self.count
    }
}

impl<T> Default for Count<T> {
    fn default() -> Self {
        Self { count: 0, element: PhantomData }
    }
}

impl<T> fmt::Debug for Count<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Count").field(&self.count).finish()
    }
}

impl<'de, T: Counted<'de>> Deserialize<'de> for Count<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_option(CountVisitor(PhantomData))
    }
}

struct CountVisitor<T>(PhantomData<T>);

impl<'de, T: Counted<'de>> Visitor<'de> for CountVisitor<T> {
    type Value = Count<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Count::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Count::default())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut count = 0_usize;
        while let Some(element) = seq.next_element::<T>()? {
            if element.counts() {
                count += 1;
            }
        }
        Ok(Count { count, element: PhantomData })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An element that counts when its `type` is `yes`.
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: Option<String>,
    }

    impl Counted<'_> for Typed {
        fn counts(&self) -> bool {
            self.kind.as_deref() == Some("yes")
        }
    }

    #[test]
    fn only_the_elements_that_count_are_counted_and_null_is_none() {
        let count: Count<Typed> =
            serde_json::from_str(r#"[{"type":"yes","big":[1,2,3]},{"type":"no"},{},{"type":"yes"}]"#)
                .unwrap();
        assert_eq!(count.get(), 2);
        let none: Count<IgnoredAny> = serde_json::from_str("null").unwrap();
        assert_eq!(none.get(), 0);
        assert!(serde_json::from_str::<Count<IgnoredAny>>("{}").is_err(), "an object is not a list");
    }
}
