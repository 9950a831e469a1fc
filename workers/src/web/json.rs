//! Reading a provider's JSON strictly on types and leniently on absence: a field that is
//! missing or `null` is absent, a field of another type than expected is an error naming its
//! path (`results[2].url is a number, not a string`).
//!
//! Not here: what the fields mean (each caller's module: the search providers, the fallback
//! extraction providers).

use serde_json::{Map, Value};

/// A JSON object and where it is in the answer.
pub(crate) struct Object<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

/// The JSON type's name, for messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses `body` as JSON whose top level is an object.
pub(crate) fn parse_object(body: &[u8]) -> Result<Value, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|error| format!("bad JSON: {error}"))?;
    if !value.is_object() {
        return Err(format!(
            "the answer is {}, not an object",
            type_name(&value)
        ));
    }
    Ok(value)
}

impl<'a> Object<'a> {
    /// The top-level object of `value` (`path` names it in messages).
    pub(crate) fn root(value: &'a Value, path: &str) -> Result<Object<'a>, String> {
        Object::at(value, path.to_owned())
    }

    fn at(value: &'a Value, path: String) -> Result<Object<'a>, String> {
        match value {
            Value::Object(map) => Ok(Object { map, path }),
            other => Err(format!("{path} is {}, not an object", type_name(other))),
        }
    }

    fn field_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn present(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    /// A string field, absent when missing or null.
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(format!(
                "{} is {}, not a string",
                self.field_path(key),
                type_name(other)
            )),
        }
    }

    /// A non-empty string field (an empty string is absent).
    pub(crate) fn text(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self
            .string(key)?
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty()))
    }

    /// A non-negative integer field (DuckDuckGo sends some as numbers, some as strings).
    pub(crate) fn count(&self, key: &str) -> Result<Option<u32>, String> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Number(number)) => number
                .as_u64()
                .and_then(|number| u32::try_from(number).ok())
                .map(Some)
                .ok_or_else(|| format!("{} is not a whole number", self.field_path(key))),
            Some(Value::String(text)) if text.trim().parse::<u32>().is_ok() => {
                Ok(text.trim().parse::<u32>().ok())
            }
            Some(other) => Err(format!(
                "{} is {}, not a number",
                self.field_path(key),
                type_name(other)
            )),
        }
    }

    /// An object field, absent when missing or null.
    pub(crate) fn object(&self, key: &str) -> Result<Option<Object<'a>>, String> {
        match self.present(key) {
            None => Ok(None),
            Some(value) => Object::at(value, self.field_path(key)).map(Some),
        }
    }

    /// A boolean field, absent when missing or null.
    pub(crate) fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(format!(
                "{} is {}, not a boolean",
                self.field_path(key),
                type_name(other)
            )),
        }
    }

    /// Whether the field is there and not null.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.present(key).is_some()
    }

    /// The raw value of a field, absent when missing or null.
    pub(crate) fn value(&self, key: &str) -> Option<&'a Value> {
        self.present(key)
    }

    /// An array field, empty when missing or null.
    pub(crate) fn array(&self, key: &str) -> Result<Vec<Element<'a>>, String> {
        match self.present(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => {
                let path = self.field_path(key);
                Ok(items
                    .iter()
                    .enumerate()
                    .map(|(index, value)| Element {
                        value,
                        path: format!("{path}[{index}]"),
                    })
                    .collect())
            }
            Some(other) => Err(format!(
                "{} is {}, not an array",
                self.field_path(key),
                type_name(other)
            )),
        }
    }

    /// An array of strings, empty when missing or null (null items are skipped).
    pub(crate) fn strings(&self, key: &str) -> Result<Vec<String>, String> {
        self.array(key)?
            .into_iter()
            .filter(|element| !element.value.is_null())
            .map(|element| element.string())
            .collect()
    }
}

/// An item of an array and its path.
pub(crate) struct Element<'a> {
    /// The item.
    pub(crate) value: &'a Value,
    path: String,
}

impl<'a> Element<'a> {
    /// The item as an object.
    pub(crate) fn object(&self) -> Result<Object<'a>, String> {
        Object::at(self.value, self.path.clone())
    }

    /// The item as a string.
    pub(crate) fn string(&self) -> Result<String, String> {
        match self.value {
            Value::String(text) => Ok(text.clone()),
            other => Err(format!(
                "{} is {}, not a string",
                self.path,
                type_name(other)
            )),
        }
    }

    /// True when the item is null.
    pub(crate) fn is_null(&self) -> bool {
        self.value.is_null()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_are_absent_and_wrong_types_are_named() {
        let value = parse_object(br#"{"a": null, "b": "x", "c": 3, "list": [{"u": 1}]}"#)
            .expect("an object");
        let root = Object::root(&value, "").expect("root");
        assert_eq!(root.string("a"), Ok(None));
        assert_eq!(root.string("missing"), Ok(None));
        assert_eq!(root.string("b"), Ok(Some("x".into())));
        assert_eq!(
            root.string("c"),
            Err("c is a number, not a string".to_owned())
        );
        let list = root.array("list").expect("an array");
        let item = list[0].object().expect("an object");
        assert_eq!(
            item.string("u"),
            Err("list[0].u is a number, not a string".to_owned())
        );
        assert!(parse_object(b"[1]").is_err());
        assert!(parse_object(b"{\"a\":").is_err());
    }
}
