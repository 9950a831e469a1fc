//! JSON objects only. serde's derived `Deserialize` of a struct also takes a JSON array of its
//! fields in order, so `"credentials": []` once read as empty credentials and
//! `["https://a.test/"]` as a fetch request; the OpenAPI schema says an object, and a client
//! sending anything else has made a mistake worth an error. [`Object`] reads a value from a
//! JSON object and refuses every other shape; [`optional_object`] does the same for an
//! optional field; `objects_only!` gives a struct (derived with `#[serde(remote = "Self")]`)
//! a `Deserialize` that does it wherever the struct is read.
//!
//! Not here: what the fields mean or how they are checked (each type's `validate`).

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// A `T` read from a JSON object only: an array (or any other shape) is refused with
/// "expected a JSON object".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_object(deserializer, None).map(Object)
    }
}

/// `T` read by its own `Deserialize` from a JSON object only; the error for any other shape
/// says "expected a JSON object", followed by `what` when given ("(a cookie)").
pub(crate) fn from_object<'de, D, T>(
    deserializer: D,
    what: Option<&'static str>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Fields<T> {
        what: Option<&'static str>,
        read: PhantomData<T>,
    }
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
        type Value = T;
        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.what {
                Some(what) => write!(formatter, "a JSON object ({what})"),
                None => formatter.write_str("a JSON object"),
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }
    deserializer.deserialize_map(Fields {
        what,
        read: PhantomData,
    })
}

/// For `#[serde(deserialize_with = "optional_object")]` on an `Option<T>` field: absent or
/// `null` is `None`, an object is read as `T`, anything else is refused.
pub fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<Object<T>>::deserialize(deserializer).map(|given| given.map(|Object(value)| value))
}

/// Implements `Serialize` and `Deserialize` for types deriving both with
/// `#[serde(remote = "Self")]` (which makes the derived code inherent functions): serialised as
/// derived, read from a JSON object only; `what` names the type in the error ("expected a JSON
/// object (a cookie)"). Beware: `Type::deserialize(d)` written as a path calls the inherent
/// function, which still takes an array; call `<Type as Deserialize>::deserialize` or
/// `serde_json::from_*` instead (`clippy.toml` forbids the inherent one, `disallowed_methods`,
/// outside this macro: a type given to it gets its line there).
macro_rules! objects_only {
    ($($name:ty => $what:literal),+ $(,)?) => {
        $(
            impl serde::Serialize for $name {
                fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                    <$name>::serialize(self, serializer)
                }
            }

            impl<'de> serde::Deserialize<'de> for $name {
                fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    // The derive's own reading (the inherent function), behind the object check:
                    // its one allowed call (`clippy.toml`).
                    struct Derived($name);
                    impl<'de> serde::Deserialize<'de> for Derived {
                        #[allow(clippy::disallowed_methods)]
                        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                            <$name>::deserialize(deserializer).map(Derived)
                        }
                    }
                    $crate::job::object::from_object(deserializer, Some($what))
                        .map(|Derived(value)| value)
                }
            }
        )+
    };
}

pub(crate) use objects_only;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Options {
        #[serde(default)]
        name: Option<String>,
        #[serde(default, deserialize_with = "optional_object")]
        inner: Option<Inner>,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    struct Inner {
        #[serde(default)]
        depth: u32,
    }

    #[test]
    fn a_struct_derived_as_usual_takes_an_array_and_object_refuses_it() {
        // What this module exists for: serde's derive reads an array as the fields in order.
        let derived: Options = serde_json::from_str("[]").expect("serde takes an array");
        assert_eq!(derived, Options::default());
        for array in ["[]", "[\"a\"]", "[null, null]"] {
            let error = serde_json::from_str::<Object<Options>>(array).expect_err(array);
            assert!(
                error.to_string().contains("JSON object"),
                "{array}: {error}"
            );
        }
        for other in ["1", "\"a\"", "null", "true"] {
            assert!(
                serde_json::from_str::<Object<Options>>(other).is_err(),
                "{other}"
            );
        }
        let Object(read) =
            serde_json::from_str::<Object<Options>>(r#"{"name": "a"}"#).expect("an object is read");
        assert_eq!(read.name.as_deref(), Some("a"));
        // Unknown fields are still refused by the struct's own rules.
        assert!(serde_json::from_str::<Object<Options>>(r#"{"colour": 1}"#).is_err());
    }

    #[test]
    fn an_optional_object_field_takes_null_or_an_object_only() {
        let read: Options = serde_json::from_str(r#"{"inner": {"depth": 2}}"#).expect("object");
        assert_eq!(read.inner, Some(Inner { depth: 2 }));
        let read: Options = serde_json::from_str(r#"{"inner": null}"#).expect("null");
        assert_eq!(read.inner, None);
        let read: Options = serde_json::from_str("{}").expect("absent");
        assert_eq!(read.inner, None);
        for bad in [r#"{"inner": []}"#, r#"{"inner": [3]}"#, r#"{"inner": 3}"#] {
            assert!(serde_json::from_str::<Options>(bad).is_err(), "{bad}");
        }
        // Through serde's buffered content too (untagged and internally tagged enums).
        let value = serde_json::json!({"inner": []});
        assert!(serde_json::from_value::<Options>(value).is_err());
    }
}
