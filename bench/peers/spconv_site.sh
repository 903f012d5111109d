# Sourced by the peer scripts on the GPU machine: unpacks the spconv and cumm wheels that
# bench/peers/fetch_spconv put in .peers/ (carried along: name `.peers` in the device tool's
# carry) into a site folder once, puts it on PYTHONPATH and checks that spconv imports.
# Needs P (the .peers folder) and SITE (the site folder) set by the caller.
vc_spconv_site() {
    if [ ! -d "$SITE/spconv" ]; then
        mkdir -p "$SITE"
        for w in spconv cumm; do
            tar -xJf "$P/$w.tar.xz" -C "$SITE" --strip-components=1 || return 1
        done
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
            "$P"/whl/*.whl || return 1
    fi
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    python3 -c 'import spconv, spconv.pytorch; print("spconv", spconv.__version__)'
}
