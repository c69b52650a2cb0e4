//! Where the texts are in an LLM request or reply body (SPEC §12.2, §12.3):
//! OpenAI chat completions, completions and responses, Anthropic messages.
//! One walker serves ext_authz (which reads the texts) and ext_proc (which
//! rewrites them in place), so both judge exactly the same strings. It only
//! locates strings: it never evaluates, logs or copies a payload.

use serde_json::{Map, Value};

/// Which way a body goes: the texts sit in different places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A prompt on its way to the model.
    Request,
    /// The model's answer on its way to the client.
    Reply,
}

/// The keys that make a JSON object a recognised body, in the order their
/// texts are judged (a request's `system` prompt comes first, as it is read
/// first by the model).
fn keys(dir: Direction) -> &'static [&'static str] {
    match dir {
        Direction::Request => &["system", "messages", "prompt", "input"],
        Direction::Reply => &["choices", "content", "output"],
    }
}

/// The texts of a recognised body, mutable, in judging order; `None` when the
/// object has none of the keys of its direction (the body is then one text).
pub fn texts_mut(obj: &mut Map<String, Value>, dir: Direction) -> Option<Vec<&mut String>> {
    let order = keys(dir);
    let mut buckets: Vec<Vec<&mut String>> = order.iter().map(|_| Vec::new()).collect();
    let mut recognised = false;
    for (k, v) in obj.iter_mut() {
        let Some(slot) = order.iter().position(|o| o == k) else {
            continue;
        };
        recognised = true;
        let out = &mut buckets[slot];
        match (dir, k.as_str()) {
            (Direction::Request, "system") | (Direction::Reply, "content") => content(v, out),
            (Direction::Request, "messages") => {
                for m in array(v) {
                    if let Some(c) = m.get_mut("content") {
                        content(c, out);
                    }
                }
            }
            (Direction::Request, "prompt") => match v {
                Value::String(s) => out.push(s),
                Value::Array(items) => out.extend(items.iter_mut().filter_map(string)),
                _ => {}
            },
            (Direction::Request, "input") => match v {
                Value::String(s) => out.push(s),
                Value::Array(items) => items.iter_mut().for_each(|i| item(i, out)),
                _ => {}
            },
            (Direction::Reply, "choices") => {
                for c in array(v) {
                    choice(c, out);
                }
            }
            (Direction::Reply, "output") => array(v).for_each(|i| item(i, out)),
            _ => {}
        }
    }
    recognised.then(|| buckets.into_iter().flatten().collect())
}

fn array(v: &mut Value) -> impl Iterator<Item = &mut Value> {
    v.as_array_mut().into_iter().flatten()
}

fn string(v: &mut Value) -> Option<&mut String> {
    match v {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// A message content: a string, or parts whose `text` is a string (OpenAI
/// `text` / `input_text` / `output_text`, Anthropic `text` blocks).
fn content<'v>(v: &'v mut Value, out: &mut Vec<&'v mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(parts) => {
            for p in parts {
                match p {
                    Value::String(s) => out.push(s),
                    Value::Object(o) => out.extend(o.get_mut("text").and_then(string)),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// An OpenAI responses item: a string, an object with a `content`, or one
/// with a `text`.
fn item<'v>(v: &'v mut Value, out: &mut Vec<&'v mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Object(o) => {
            if o.contains_key("content") {
                if let Some(c) = o.get_mut("content") {
                    content(c, out);
                }
            } else {
                out.extend(o.get_mut("text").and_then(string));
            }
        }
        _ => {}
    }
}

/// A reply choice: chat (`message.content`, and tool call arguments, which
/// are text the model wrote too) or completions (`text`).
fn choice<'v>(v: &'v mut Value, out: &mut Vec<&'v mut String>) {
    let Value::Object(o) = v else {
        return;
    };
    for (k, field) in o.iter_mut() {
        match k.as_str() {
            "text" => out.extend(string(field)),
            "message" => {
                let Value::Object(m) = field else { continue };
                for (mk, mv) in m.iter_mut() {
                    match mk.as_str() {
                        "content" => content(mv, out),
                        "tool_calls" => {
                            for call in array(mv) {
                                if let Some(args) = call
                                    .get_mut("function")
                                    .and_then(|f| f.get_mut("arguments"))
                                    .and_then(string)
                                {
                                    out.push(args);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(v: Value, dir: Direction) -> Option<Vec<String>> {
        let Value::Object(mut o) = v else {
            return None;
        };
        texts_mut(&mut o, dir).map(|t| t.into_iter().map(|s| s.clone()).collect())
    }

    #[test]
    fn request_texts_in_judging_order() {
        let body = json!({
            "prompt": ["p1", 7, "p2"],
            "messages": [{"role": "user", "content": "m1"},
                         {"role": "user", "content": [{"type": "text", "text": "m2"}, {"type": "image_url"}]}],
            "system": [{"type": "text", "text": "s"}],
            "input": ["i1", {"content": [{"type": "input_text", "text": "i2"}]}, {"text": "i3"}],
        });
        assert_eq!(
            texts(body, Direction::Request).unwrap(),
            ["s", "m1", "m2", "p1", "p2", "i1", "i2", "i3"]
        );
        assert_eq!(texts(json!({"model": "x"}), Direction::Request), None);
    }

    #[test]
    fn reply_texts() {
        let openai = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a",
            "tool_calls": [{"function": {"name": "f", "arguments": "{\"to\":\"b\"}"}}]}},
            {"index": 1, "text": "c"}]});
        assert_eq!(
            texts(openai, Direction::Reply).unwrap(),
            ["a", "{\"to\":\"b\"}", "c"]
        );
        let anthropic = json!({"type": "message", "content": [{"type": "text", "text": "x"}, {"type": "tool_use"}]});
        assert_eq!(texts(anthropic, Direction::Reply).unwrap(), ["x"]);
        let responses = json!({"output": [{"type": "message", "content": [{"type": "output_text", "text": "r"}]}]});
        assert_eq!(texts(responses, Direction::Reply).unwrap(), ["r"]);
        assert_eq!(
            texts(json!({"error": {"message": "m"}}), Direction::Reply),
            None
        );
    }
}
