export CUTE_TORCH_PREBUILT_COMPILER=bundle CUTE_TORCH_BUILD_DIR=build/gpu PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if ! python3 -c "import cute_torch._C" 2>/dev/null; then
python3 setup.py -q build_ext --inplace > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
python3 setup.py -q egg_info >> $OUT/build.log 2>&1
fi
