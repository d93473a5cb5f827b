//! docs/README.md is the index of docs/ (issue 25): every page there is listed, and every
//! page it links exists, so a new page cannot go unlisted and a renamed one cannot leave a
//! dead link.

use std::path::Path;

#[test]
fn the_docs_index_lists_every_page_and_links_only_pages_that_exist() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let index = std::fs::read_to_string(docs.join("README.md")).unwrap();
    let linked: Vec<&str> = index
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| !target.contains("://"))
        .collect();
    for target in &linked {
        assert!(
            docs.join(target).is_file(),
            "docs/README.md links `{target}`, which is not in docs/"
        );
    }
    for entry in std::fs::read_dir(&docs).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && name != "README.md" {
            assert!(
                linked.contains(&name.as_str()),
                "docs/{name} is not listed in docs/README.md: say there what it is for"
            );
        }
    }
}
