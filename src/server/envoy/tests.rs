use super::*;

fn texts(body: &str) -> Vec<String> {
    llm_texts(body.as_bytes()).unwrap()
}

#[test]
fn llm_request_formats_give_their_texts_in_order() {
    // OpenAI chat completions: strings and text parts; images skipped.
    assert_eq!(
        texts(
            r#"{"model":"m","messages":[{"role":"system","content":"Be brief."},
            {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image_url","image_url":{"url":"data:x"}}]},
            {"role":"assistant","content":null,"tool_calls":[]}]}"#
        ),
        ["Be brief.", "Hi"]
    );
    // Completions: a prompt or a list of prompts.
    assert_eq!(texts(r#"{"model":"m","prompt":"Say hi"}"#), ["Say hi"]);
    assert_eq!(texts(r#"{"prompt":["a","b"]}"#), ["a", "b"]);
    // Responses: a string, or items with content parts.
    assert_eq!(texts(r#"{"model":"m","input":"Hello"}"#), ["Hello"]);
    assert_eq!(
        texts(
            r#"{"input":[{"role":"user","content":[{"type":"input_text","text":"one"}]},
            {"role":"user","content":"two"},"three"]}"#
        ),
        ["one", "two", "three"]
    );
    // Anthropic messages: system (string or blocks) first, then messages.
    assert_eq!(
        texts(
            r#"{"model":"claude","system":[{"type":"text","text":"sys"}],
            "messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}"#
        ),
        ["sys", "q"]
    );
    // Anything else is one text: other JSON, text, bytes that are not UTF-8.
    assert_eq!(texts(r#"{"query":"x"}"#), [r#"{"query":"x"}"#]);
    assert_eq!(texts("plain words"), ["plain words"]);
    assert_eq!(texts(""), [""]);
    assert_eq!(llm_texts(b"a\xffb").unwrap(), ["a\u{fffd}b"]);
    // A key twice: the upstream might read the value that was not judged.
    assert_eq!(
        llm_texts(br#"{"messages":[{"content":"SSN 123-45-6789"}],"messages":[]}"#).unwrap_err(),
        "the JSON body has an object with the same key twice"
    );
    assert_eq!(
        llm_texts(br#"{"prompt":"a","x":{"k":1,"k":2}}"#).unwrap_err(),
        "the JSON body has an object with the same key twice"
    );
    // A recognised body with no text has none.
    assert!(texts(r#"{"messages":[]}"#).is_empty());
}
