//! Shared by the OpenAPI tests (`openapi.yaml`, `openapi-catalog.yaml`):
//! `$ref` resolution and a small JSON Schema validator.

use serde_json::Value;

/// The schema `v` stands for, following `$ref`s within `doc`.
pub fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let target = doc
                .pointer(r.trim_start_matches('#'))
                .unwrap_or_else(|| panic!("unresolved $ref {r}"));
            resolve(doc, target)
        }
        None => v,
    }
}

/// A small JSON Schema (2020-12 subset) validator: what the documents use.
pub fn validate(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let schema = resolve(doc, schema);
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = names.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: {v} is not of type {names:?}"));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            return Err(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Err(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            return Err(format!("{at}: {n} < {min}"));
        }
    }
    if let (Some(p), Some(s)) = (schema.get("pattern").and_then(Value::as_str), v.as_str()) {
        if !regex::Regex::new(p).unwrap().is_match(s) {
            return Err(format!("{at}: `{s}` does not match {p}"));
        }
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let passing = options
            .iter()
            .filter(|o| validate(doc, o, v, at).is_ok())
            .count();
        if passing != 1 {
            return Err(format!("{at}: {v} matches {passing} of oneOf"));
        }
    }
    if let Value::Object(obj) = v {
        let props = schema.get("properties").and_then(Value::as_object);
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                return Err(format!("{at}: missing `{r}` in {v}"));
            }
        }
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(doc, s, x, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at}: undocumented member `{k}`"))
                }
                None => {}
            }
        }
    }
    if let Value::Array(items) = v {
        if let Some(n) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < n {
                return Err(format!("{at}: fewer than {n} items"));
            }
        }
        if let Some(n) = schema.get("maxItems").and_then(Value::as_u64) {
            if (items.len() as u64) > n {
                return Err(format!("{at}: more than {n} items"));
            }
        }
        if let Some(s) = schema.get("items") {
            for (i, x) in items.iter().enumerate() {
                validate(doc, s, x, &format!("{at}[{i}]"))?;
            }
        }
    }
    Ok(())
}

/// Panics naming the first `$ref` of `doc` that points nowhere.
pub fn assert_refs_resolve(doc: &Value) {
    fn walk(doc: &Value, v: &Value) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    assert!(
                        doc.pointer(r.trim_start_matches('#')).is_some(),
                        "unresolved $ref {r}"
                    );
                }
                m.values().for_each(|x| walk(doc, x));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(doc, x)),
            _ => {}
        }
    }
    walk(doc, doc);
}
